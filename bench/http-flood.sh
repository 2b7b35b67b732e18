#!/bin/sh
# http-flood.sh: what a connection flood costs a normal client. The median
# and p99 time of a small GET on a new connection each (as a CLI call makes
# it) to t/helpers/http-testserver (the same server code as denv-cp, its
# default limits), while 1,100 silent connections from 49 loopback
# addresses (127.0.0.2 up) are re-opened the moment they are dropped,
# against the same requests with no flood; runs alternate. QUICK=1: 100
# requests a run and one run, else 300 and three.
. "$(dirname "$0")/lib/common.sh"
SRV=$BUILD/helpers/http-testserver
if quick; then reqs=100 runs=1; else reqs=300 runs=3; fi
T=$(mktemp -d "${TMPDIR:-/tmp}/denv-bench-flood.XXXXXX") || exit 1
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The target is the issue's: a normal client answered in under 1 s.
fig http_flood_p50 "HTTP, 1,100-conn flood: new-conn GET median" "no flood" "ms" "<1000"
fig http_flood_p99 "HTTP, 1,100-conn flood: new-conn GET p99" "no flood" "ms" "<1000"
nope() {
	pending http_flood_p50 "$1"
	pending http_flood_p99 "$1"
	exit 0
}
[ -x "$SRV" ] || nope "$SRV not built (make BUILD=... $SRV)"
python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.2", 0))' 2>/dev/null ||
	nope "cannot bind 127.0.0.2 (no 127.0.0.0/8 on loopback)"

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

cat >"$T/flood.py" <<'EOF'
import selectors, socket, sys
port, n, addrs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
sel = selectors.DefaultSelector()
def dial(i):
    s = socket.socket()
    s.setblocking(False)
    # Pick the port at connect time, clear of the server's TIME_WAIT pairs
    # (a port picked at bind time may collide and cost a SYN retransmit).
    s.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24), 1)
    s.bind(("127.0.0.%d" % (2 + i % addrs), 0))
    s.connect_ex(("127.0.0.1", port))
    sel.register(s, selectors.EVENT_READ, i)
for i in range(n):
    dial(i)
print("up", flush=True)
while True:
    for key, _ in sel.select(1):
        try:
            key.fileobj.recv(4096)
        except OSError:
            pass
        sel.unregister(key.fileobj)
        key.fileobj.close()
        dial(key.data)
EOF
# measure -> "p50 p99" in ms over $reqs requests, each on a new connection
measure() {
	python3 - "$port" "$reqs" <<'EOF'
import http.client, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
ts, bad = [], 0
for _ in range(n):
    t0 = time.perf_counter()
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/hello")
        r = c.getresponse()
        r.read()
        bad += r.status != 200
        c.close()
    except OSError:
        bad += 1
    ts.append((time.perf_counter() - t0) * 1000)
ts.sort()
print("%.3f %.3f %d" % (ts[len(ts) // 2], ts[min(len(ts) - 1, int(len(ts) * 0.99))], bad))
EOF
}

i=0
while [ $i -lt $runs ]; do
	read -r p50 p99 bad <<EOF
$(measure)
EOF
	base http_flood_p50 "$p50"
	base http_flood_p99 "$p99"
	python3 "$T/flood.py" "$port" 1100 49 >"$T/flood.out" 2>"$T/flood.err" &
	fpid=$!
	pids="$pids $fpid"
	j=0
	until grep -q up "$T/flood.out" || [ $j -ge 100 ]; do sleep 0.05; j=$((j + 1)); done
	sleep 1
	read -r p50 p99 bad <<EOF
$(measure)
EOF
	kill "$fpid" 2>/dev/null
	wait "$fpid" 2>/dev/null
	[ "$bad" = 0 ] || note "during the flood $bad of $reqs requests failed"
	sample http_flood_p50 "$p50"
	sample http_flood_p99 "$p99"
	echo "run $i: flood p50 $p50 ms p99 $p99 ms, failed $bad"
	i=$((i + 1))
	sleep 1
done
