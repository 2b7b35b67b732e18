#!/bin/sh
# bench/http.sh: requests/s and p99 latency of a small JSON GET on loopback,
# our server (t/helpers/http-testserver, one thread) against nginx (one
# worker) serving the same bytes, with wrk -t1 -c50 -d5s --latency.
# Prints figures and the ratio; asserts nothing.
set -u
BUILD=${BUILD:-build}
case $BUILD in /*) B=$BUILD ;; *) B=$PWD/$BUILD ;; esac
SRV="$B/helpers/http-testserver"
DUR=${HTTP_BENCH_DURATION:-5s}
T=$(mktemp -d)
pids=

cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

for tool in wrk nginx; do
	command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || { echo "bench http: $tool not installed, skipped"; exit 0; }
done
[ -x "$SRV" ] || { echo "bench http: $SRV not built (make $BUILD/helpers/http-testserver), skipped"; exit 0; }
NGINX=$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# run_wrk URL -> "rps p99"
run_wrk() {
	wrk -t1 -c50 -d"$DUR" --latency "$1" >"$T/wrk.out" 2>&1
	rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$T/wrk.out")
	p99=$(sed -n 's/^ *99% *\([0-9.]*[a-z]*\).*/\1/p' "$T/wrk.out")
	errs=$(sed -n 's/^ *Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' "$T/wrk.out")
	echo "${rps:-0} ${p99:-?} ${errs:-0}"
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
[ -n "$port" ] || { echo "bench http: server did not start"; exit 0; }

NP=$(free_port)
mkdir -p "$T/nginx"
cat >"$T/nginx.conf" <<EOF
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
EOF
"$NGINX" -c "$T/nginx.conf" -p "$T/nginx" >"$T/nginx.out" 2>&1 &
pids="$pids $!"
sleep 0.5

ours_body=$(curl -s "http://127.0.0.1:$port/hello")
nginx_body=$(curl -s "http://127.0.0.1:$NP/hello")
[ "$ours_body" = "$nginx_body" ] || echo "bench http: warning: bodies differ: '$ours_body' vs '$nginx_body'"

set -- $(run_wrk "http://127.0.0.1:$port/hello")
o_rps=$1 o_p99=$2 o_err=$3
set -- $(run_wrk "http://127.0.0.1:$NP/hello")
n_rps=$1 n_p99=$2 n_err=$3
ratio=$(awk -v a="$o_rps" -v b="$n_rps" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')

echo "bench http: small JSON GET, wrk -t1 -c50 -d$DUR --latency, loopback"
printf '  %-22s %12s %10s %8s\n' "server" "requests/s" "p99" "non-2xx"
printf '  %-22s %12s %10s %8s\n' "denv http (1 thread)" "$o_rps" "$o_p99" "$o_err"
printf '  %-22s %12s %10s %8s\n' "nginx (1 worker)" "$n_rps" "$n_p99" "$n_err"
echo "  ratio denv/nginx: ${ratio}x (target >= 0.8x)"
