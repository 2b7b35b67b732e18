#!/bin/sh
# http.sh: the HTTP module alone: requests/s and p99 of a small JSON GET on
# loopback, our server (t/helpers/http-testserver, one thread) against nginx
# (one worker) serving the same bytes, with wrk -t1 -c50 --latency; runs
# alternate. HTTP_BENCH_DURATION overrides the 5 s (2 s with QUICK=1) of
# each wrk run. Reported next to the API figure (bench/api.sh), which is the
# one the issue sets a target for.
. "$(dirname "$0")/lib/common.sh"
SRV=$BUILD/helpers/http-testserver
if quick; then DUR=${HTTP_BENCH_DURATION:-2s} runs=1; else DUR=${HTTP_BENCH_DURATION:-5s} runs=3; fi
T=$(mktemp -d "${TMPDIR:-/tmp}/denv-bench-http.XXXXXX") || exit 1
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fig http_rps "HTTP module: small JSON GET requests/s" "nginx, same bytes" "req/s" "ratio>=0.8"
fig http_p99 "HTTP module: small JSON GET p99 latency" "nginx, same bytes" "ms" "ratio<=1.25"
nope() {
	pending http_rps "$1"
	pending http_p99 "$1"
	exit 0
}
command -v wrk >/dev/null 2>&1 || nope "wrk not installed (apt-get install wrk)"
NGINX=$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || nope "nginx not installed (apt-get install nginx-light)"
[ -x "$SRV" ] || nope "$SRV not built (make BUILD=... $SRV)"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# run_wrk URL -> "rps p99-in-ms non-2xx"
run_wrk() {
	wrk -t1 -c50 -d"$DUR" --latency "$1" >"$T/wrk.out" 2>&1
	cat "$T/wrk.out"
	rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$T/wrk.out")
	p99=$(sed -n 's/^ *99% *\([0-9.]*[a-z]*\).*/\1/p' "$T/wrk.out" |
		awk '/us$/ { print $0 / 1000; next } /ms$/ { print $0 + 0; next } /s$/ { print $0 * 1000; next }')
	errs=$(sed -n 's/^ *Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' "$T/wrk.out")
	echo "WRK ${rps:-0} ${p99:-0} ${errs:-0}" >"$T/wrk.fig"
}

"$SRV" -listen 127.0.0.1:0 >"$T/srv.out" 2>"$T/srv.err" &
pids="$pids $!"
port=
i=0
while [ -z "$port" ] && [ $i -lt 100 ]; do
	sleep 0.05
	port=$(sed -n 's/^port //p' "$T/srv.out" 2>/dev/null)
	i=$((i + 1))
done
[ -n "$port" ] || nope "http-testserver did not start"

NP=$(free_port)
mkdir -p "$T/nginx"
cat >"$T/nginx.conf" <<EOC
worker_processes 1;
daemon off;
pid $T/nginx.pid;
error_log $T/nginx/error.log warn;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $T/nginx;
	proxy_temp_path $T/nginx;
	fastcgi_temp_path $T/nginx;
	uwsgi_temp_path $T/nginx;
	scgi_temp_path $T/nginx;
	keepalive_requests 100000000;
	server_tokens off;
	server {
		listen 127.0.0.1:$NP;
		location = /hello {
			default_type application/json;
			return 200 '{"hello":"world","n":42}\n';
		}
	}
}
EOC
"$NGINX" -c "$T/nginx.conf" -p "$T/nginx" >"$T/nginx.out" 2>&1 &
pids="$pids $!"
i=0
until curl -fs "http://127.0.0.1:$NP/hello" >/dev/null 2>&1 || [ $i -ge 100 ]; do sleep 0.05; i=$((i + 1)); done

ours_body=$(curl -s "http://127.0.0.1:$port/hello")
nginx_body=$(curl -s "http://127.0.0.1:$NP/hello")
[ "$ours_body" = "$nginx_body" ] || nope "bodies differ: '$ours_body' vs '$nginx_body'"

i=0
while [ $i -lt $runs ]; do
	run_wrk "http://127.0.0.1:$port/hello"
	read -r _ rps p99 errs <"$T/wrk.fig"
	[ "$errs" = 0 ] || nope "http-testserver answered $errs non-2xx responses"
	sample http_rps "$rps"
	sample http_p99 "$p99"
	run_wrk "http://127.0.0.1:$NP/hello"
	read -r _ rps p99 errs <"$T/wrk.fig"
	base http_rps "$rps"
	base http_p99 "$p99"
	i=$((i + 1))
done
