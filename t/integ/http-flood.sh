#!/bin/sh
# http-flood.sh: the connection flood of issue 24 against a real denv-cp with
# a joined denvd. FLOOD_CONNS (1,100) silent TCP connections from
# FLOOD_ADDRS (49) loopback addresses, 127.0.0.2 up, each re-opened the
# moment the server drops it, for at most FLOOD_SECS (90) seconds. While
# it holds: curl with the API key (from 127.0.0.1) is answered every time;
# denvd is stopped (the host shows disconnected), started again, and
# GET /v1/hosts shows it connected again; denv-cp logged evictions (so the
# flood did fill the server). Latencies go in TAP comments, not asserts.
# Loopback only. Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_bins denv-cp denvd denv
[ -x "$py" ] || suite_skip "python/.venv is not set up"
command -v curl >/dev/null 2>&1 || suite_skip "curl is not installed"
suite_need_docker busybox
tmp=$(mktemp -d "${TMPDIR:-/tmp}/http-flood.XXXXXX")
. "$top/t/lib/stack.sh"
N=${FLOOD_CONNS:-1100}
A=${FLOOD_ADDRS:-49}
SECS=${FLOOD_SECS:-90}
CURLS=20
flood_pid=
t=0
failed=0
ok() {
	t=$((t + 1))
	if [ "$1" = 0 ]; then echo "ok $t - $2"; else echo "not ok $t - $2"; failed=1; fi
}

cleanup() {
	[ -n "$flood_pid" ] && kill "$flood_pid" 2>/dev/null && wait "$flood_pid" 2>/dev/null
	stack_stop
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.2", 0))' 2>/dev/null ||
	suite_skip "cannot bind 127.0.0.2 (no 127.0.0.0/8 on loopback)"

stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined"
[ $t -eq 1 ] && [ $failed -eq 0 ] || { cat "$tmp/start.log" "$tmp/cp.log" | sed 's/^/# /'; echo "1..$t"; exit 1; }
port=${DENV_SERVER##*:}

# The flood: prints "open K reopened R" to its stats file twice a second;
# stops when the stop file appears or after SECS.
cat >"$tmp/flood.py" <<'EOF'
import os, selectors, socket, sys, time
port, n, addrs, secs, stats, stop = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
sel = selectors.DefaultSelector()
reopened = opened = 0
def dial(i):
    global opened
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.bind(("127.0.0.%d" % (2 + i % addrs), 0))
        s.connect_ex(("127.0.0.1", port))
    except OSError:
        s.close()
        return False
    sel.register(s, selectors.EVENT_READ, i)
    opened += 1
    return True
for i in range(n):
    dial(i)
end = time.time() + secs
last = 0
while time.time() < end and not os.path.exists(stop):
    for key, _ in sel.select(0.1):
        s = key.fileobj
        try:
            d = s.recv(4096)
        except BlockingIOError:
            continue
        except OSError:
            d = b""
        # Dropped (or answered): re-open it at once, as an attacker would.
        sel.unregister(s)
        s.close()
        reopened += 1
        dial(key.data)
    now = time.time()
    if now - last > 0.5:
        last = now
        with open(stats + ".new", "w") as f:
            f.write("open %d reopened %d\n" % (len(sel.get_map()), reopened))
        os.replace(stats + ".new", stats)
EOF
python3 "$tmp/flood.py" "$port" "$N" "$A" "$SECS" "$tmp/flood.stats" "$tmp/stop" 2>"$tmp/flood.err" &
flood_pid=$!
# Let it build up: every connection dialled, and a second for the server to
# take them in (the old server answered 503 to 96% of requests from here on).
i=0
until grep -q "^open $N " "$tmp/flood.stats" 2>/dev/null || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
echo "# flood: $(cat "$tmp/flood.stats" 2>/dev/null) ($N connections from $A addresses)"

# A normal client, one request after another, during the flood.
good=0 worst=0
for k in $(seq 1 $CURLS); do
	out=$(curl -sS -o /dev/null -m 10 -w '%{http_code} %{time_total}' \
		-H "Authorization: Bearer $DENV_API_KEY" "$DENV_SERVER/v1/me" 2>>"$tmp/curl.err")
	[ "${out%% *}" = 200 ] && good=$((good + 1))
	worst=$(echo "$worst ${out#* }" | awk '{ print ($2 > $1 ? $2 : $1) }')
done
[ $good -eq $CURLS ]
ok $? "curl with the API key answered 200 $good/$CURLS times during the flood"
echo "# slowest of the $CURLS requests: ${worst}s"
grep -q "connection limits: [1-9][0-9]* evicted" "$tmp/cp.log"
ok $? "the flood filled the server: denv-cp evicted waiting connections"

# hoststate: "connected" or "disconnected" from GET /v1/hosts (one host), else "error".
hoststate() {
	curl -sS -m 3 -H "Authorization: Bearer $DENV_API_KEY" "$DENV_SERVER/v1/hosts" 2>>"$tmp/curl.err" |
		"$py" -c '
import json, sys
try:
    h = json.load(sys.stdin)["hosts"]
    print("connected" if len(h) == 1 and h[0]["connected"] is True else
          "disconnected" if len(h) == 1 and h[0]["connected"] is False else "error")
except Exception:
    print("error")'
}
connected() { [ "$(hoststate)" = connected ]; }

# The sidecar goes away and comes back while the flood holds.
kill "$stack_sc_pid" 2>/dev/null
wait "$stack_sc_pid" 2>/dev/null
i=0
while [ "$(hoststate)" != disconnected ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
[ "$(hoststate)" = disconnected ]
ok $? "denvd stopped: GET /v1/hosts shows the host disconnected"
t0=$(date +%s.%N)
"$top/bin/denvd" run --server "$DENV_SERVER" --state "$tmp/host.json" --data "$tmp/data" \
	--probe-url http://192.0.2.1/ >"$tmp/denvd2.log" 2>&1 &
stack_sc_pid=$!
# Within 30 s (its first retry comes after 1 s, the next after 3 s), and
# while the flood still runs.
end=$(($(date +%s) + 30))
until connected || [ "$(date +%s)" -ge $end ]; do sleep 0.2; done
connected && kill -0 "$flood_pid" 2>/dev/null
ok $? "denvd started again during the flood: GET /v1/hosts shows it connected"
echo "# reconnected after $(echo "$(date +%s.%N) $t0" | awk '{ printf "%.2f", $1 - $2 }') s;" \
	"attempts: $(grep -c 'connecting to' "$tmp/denvd2.log")"
grep -E "warn|stream closed" "$tmp/denvd2.log" | sed 's/^/# denvd: /'
echo "# flood: $(cat "$tmp/flood.stats" 2>/dev/null)"
kill -0 "$flood_pid" 2>/dev/null
ok $? "the flood was still running"
grep "connection limits" "$tmp/cp.log" | tail -n 2 | sed 's/^/# /'

touch "$tmp/stop"
wait "$flood_pid" 2>/dev/null
flood_pid=
sleep 0.5
out=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $DENV_API_KEY" "$DENV_SERVER/v1/me")
[ "$out" = 200 ]
ok $? "served after the flood"
if [ $failed -ne 0 ]; then
	tail -n 20 "$tmp/cp.log" | sed 's/^/# cp: /'
	tail -n 20 "$tmp/denvd2.log" 2>/dev/null | sed 's/^/# denvd: /'
	sed 's/^/# curl: /' "$tmp/curl.err" 2>/dev/null | tail -n 5
	sed 's/^/# flood: /' "$tmp/flood.err" | tail -n 5
fi
echo "1..$t"
exit $failed
