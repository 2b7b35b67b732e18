#!/bin/sh
# http-curl.sh: the HTTP server against real clients (curl, raw python
# sockets) and the HTTP clients against real servers (python's http.server,
# openssl s_server), plain and TLS. Prints TAP. Loopback only.
set -u
B=${DENV_BUILD:-$PWD/build}
SRV="$B/helpers/http-testserver"
CLI="$B/helpers/http-client"
T=$(mktemp -d)
n=0
fail=0
pids=

ok() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fail=1; fi
}
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

if [ ! -x "$SRV" ] || [ ! -x "$CLI" ]; then
	echo "1..0 # SKIP helpers not built in $B"
	exit 0
fi

# start_server NAME ARGS...: run the test server, set $port.
start_server() {
	name=$1
	shift
	"$SRV" "$@" >"$T/$name.out" 2>"$T/$name.err" &
	pids="$pids $!"
	i=0
	port=
	while [ $i -lt 400 ]; do
		port=$(sed -n 's/^port //p' "$T/$name.out" 2>/dev/null)
		[ -n "$port" ] && return 0
		sleep 0.05
		i=$((i + 1))
	done
	ok 1 "server $name starts: $(cat "$T/$name.err")"
	echo "1..$n"
	exit 1
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() {
	python3 - "$1" <<'EOF'
import socket, sys, time
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2).close(); sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
EOF
}

start_server plain
P=$port
U="http://127.0.0.1:$P"

# --- the server with curl ---
curl -sv "$U/hello" "$U/hello" >"$T/ka.out" 2>&1
grep -qiE 're-?using existing connection' "$T/ka.out"
ok $? "curl keep-alive: two requests on one connection"
[ "$(grep -c '"hello":"world"' "$T/ka.out")" -eq 2 ]
ok $? "  both answered"

head -c 1000000 /dev/urandom >"$T/blob"
curl -s -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/octet-stream' \
	--data-binary @"$T/blob" "$U/echo" >"$T/blob.back"
cmp -s "$T/blob" "$T/blob.back"
ok $? "chunked upload of 1 MB echoed back intact"
curl -s --data-binary @"$T/blob" "$U/echo" | cmp -s "$T/blob" -
ok $? "Content-Length upload echoed back intact"

code=$(curl -s -o "$T/413.out" -w '%{http_code}' --data-binary @"$T/blob" "$U/small")
[ "$code" = 413 ] && grep -q '"error"' "$T/413.out"
ok $? "oversize body: 413 with a JSON error (got $code)"

code=$(curl -s -o "$T/404.out" -w '%{http_code}' "$U/nowhere")
[ "$code" = 404 ] && grep -q '{"error":"not found"}' "$T/404.out"
ok $? "unknown path: 404 JSON"
curl -s -i -X DELETE "$U/hello" >"$T/405.out"
grep -q '^HTTP/1.1 405' "$T/405.out" && grep -qi '^Allow: GET' "$T/405.out"
ok $? "wrong method: 405 with Allow"

python3 - "$P" >"$T/garbage.out" 2>&1 <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2)
s.sendall(b"THIS IS NOT HTTP\r\n\r\n")
data = b""
t0 = time.time()
while time.time() - t0 < 3:
    d = s.recv(4096)
    if not d:
        print("closed"); break
    data += d
print(data.decode(errors="replace"))
EOF
grep -q '^closed' "$T/garbage.out" && grep -q 'HTTP/1.1 400' "$T/garbage.out"
ok $? "garbage: 400 then the server closes"

python3 - "$P" >"$T/pipe.out" 2>&1 <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 2)
reqs = (b"GET /park?ms=200 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nsecond"
        b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
s.sendall(reqs)
data = b""
while True:
    d = s.recv(65536)
    if not d: break
    data += d
print(data.decode())
EOF
python3 -c 'import sys; d=open(sys.argv[1]).read(); a=d.find("parked"); b=d.find("second"); c=d.find("world"); sys.exit(0 if d.count("HTTP/1.1 200 OK")==3 and 0<=a<b<c else 1)' "$T/pipe.out"
ok $? "pipelined requests (first one parked) answered in order"

out=$(curl -s "$U/park?ms=300")
echo "$out" | grep -q '"parked":true'
ok $? "parked request answered by a timer: $out"

curl -s -i -N "$U/stream?n=4&ms=100" >"$T/stream.out"
grep -qi '^Transfer-Encoding: chunked' "$T/stream.out" && grep -q 'chunk 3' "$T/stream.out"
ok $? "streamed response (chunked, 4 chunks)"

# --- HTTPS with a self-signed certificate ---
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/cert.pem" -days 2 \
	-subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" >/dev/null 2>&1
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key2.pem" -out "$T/cert2.pem" -days 2 \
	-subj "/CN=other.example" -addext "subjectAltName=DNS:other.example" >/dev/null 2>&1
start_server tls -tls-cert "$T/cert.pem" -tls-key "$T/key.pem"
S=$port
out=$(curl -s --cacert "$T/cert.pem" "https://127.0.0.1:$S/hello")
echo "$out" | grep -q '"hello":"world"'
ok $? "HTTPS with a self-signed cert via curl --cacert"
curl -sv --cacert "$T/cert.pem" "https://localhost:$S/hello" "https://localhost:$S/hello" 2>&1 | grep -qiE 're-?using existing connection'
ok $? "HTTPS keep-alive with curl"
curl -s --cacert "$T/cert.pem" -H 'Transfer-Encoding: chunked' --data-binary @"$T/blob" "https://127.0.0.1:$S/echo" | cmp -s "$T/blob" -
ok $? "HTTPS chunked upload echoed intact"
curl -s "https://127.0.0.1:$S/hello" >/dev/null 2>&1
[ $? -ne 0 ]
ok $? "curl without the CA refuses our certificate"

DENV_CA_FILE="$T/cert.pem" "$CLI" "https://127.0.0.1:$S/hello" "https://127.0.0.1:$S/hello" >"$T/c1.out" 2>&1
[ $? -eq 0 ] && grep -q '^dials 1$' "$T/c1.out" && [ "$(grep -c '^status 200' "$T/c1.out")" -eq 2 ]
ok $? "our client over TLS to our server (DENV_CA_FILE), one connection for two requests"
DENV_CA_FILE="$T/cert.pem" "$CLI" -async "https://127.0.0.1:$S/hello" "https://127.0.0.1:$S/park?ms=100" >"$T/c2.out" 2>&1
[ $? -eq 0 ] && [ "$(grep -c '^status 200' "$T/c2.out")" -eq 2 ]
ok $? "async client over TLS"

# --- our clients against other servers ---
mkdir -p "$T/www"
head -c 300000 /dev/urandom | base64 >"$T/www/file.txt"
PY=$(free_port)
(cd "$T/www" && exec python3 -m http.server --bind 127.0.0.1 --protocol HTTP/1.1 "$PY" >"$T/py.log" 2>&1) &
pids="$pids $!"
wait_port "$PY"
"$CLI" "http://127.0.0.1:$PY/file.txt" "http://127.0.0.1:$PY/file.txt" >"$T/py.out" 2>&1
[ $? -eq 0 ] && grep -q '^dials 1$' "$T/py.out"
ok $? "client against python http.server: keep-alive (one connection)"
"$CLI" "http://127.0.0.1:$PY/file.txt" | sed -n '2,$p' | grep -v '^dials' >"$T/py.body"
cmp -s "$T/py.body" "$T/www/file.txt"
ok $? "  file body intact"
"$CLI" -async "http://127.0.0.1:$PY/file.txt" | sed -n '2,$p' | grep -v '^dials' | cmp -s - "$T/www/file.txt"
ok $? "  async client: file body intact"
"$CLI" "http://127.0.0.1:$PY/missing" | grep -q '^status 404'
ok $? "  404 returned as a status, not an error"

OS=$(free_port)
openssl s_server -accept "127.0.0.1:$OS" -cert "$T/cert.pem" -key "$T/key.pem" -www -quiet >"$T/ossl.log" 2>&1 &
pids="$pids $!"
wait_port "$OS"
DENV_CA_FILE="$T/cert.pem" "$CLI" "https://127.0.0.1:$OS/" >"$T/os1.out" 2>&1
[ $? -eq 0 ] && grep -q '^status 200' "$T/os1.out"
ok $? "client against openssl s_server -www with DENV_CA_FILE"
DENV_CA_FILE="$T/cert.pem" "$CLI" "https://localhost:$OS/" >"$T/os1b.out" 2>&1
ok $? "  by host name (localhost in the SAN)"
env -u DENV_CA_FILE "$CLI" "https://127.0.0.1:$OS/" >"$T/os2.out" 2>&1
[ $? -ne 0 ] && grep -q 'certificate verify failed' "$T/os2.out"
ok $? "untrusted CA refused: $(head -1 "$T/os2.out")"
OS2=$(free_port)
openssl s_server -accept "127.0.0.1:$OS2" -cert "$T/cert2.pem" -key "$T/key2.pem" -www -quiet >"$T/ossl2.log" 2>&1 &
pids="$pids $!"
wait_port "$OS2"
DENV_CA_FILE="$T/cert2.pem" "$CLI" "https://localhost:$OS2/" >"$T/os3.out" 2>&1
[ $? -ne 0 ] && grep -qi 'hostname mismatch' "$T/os3.out"
ok $? "hostname mismatch refused: $(head -1 "$T/os3.out")"
DENV_CA_FILE="$T/cert2.pem" "$CLI" -async "https://127.0.0.1:$OS2/" >"$T/os4.out" 2>&1
[ $? -ne 0 ] && grep -qi 'ip address mismatch\|mismatch' "$T/os4.out"
ok $? "async client: address mismatch refused: $(head -1 "$T/os4.out")"

"$CLI" http://127.0.0.1:1/ >"$T/refused.out" 2>&1
grep -q 'error: connect 127.0.0.1:1: Connection refused' "$T/refused.out"
ok $? "connection refused error reads well"
"$CLI" -t 300 "$U/park?ms=3000" >"$T/to.out" 2>&1
grep -q "error: timeout after 300 ms reading response from 127.0.0.1:$P" "$T/to.out"
ok $? "timeout error reads well"

# --- graceful shutdown: an in-flight request finishes ---
curl -s "$U/park?ms=500" >"$T/inflight.out" &
cpid=$!
sleep 0.2
kill -TERM $(echo $pids | awk '{print $1}')
wait $cpid
grep -q '"parked":true' "$T/inflight.out"
ok $? "SIGTERM: the in-flight request still gets its answer"
sleep 0.3
grep -q '^bye' "$T/plain.out"
ok $? "  and the server exits after it"

echo "1..$n"
exit $fail
