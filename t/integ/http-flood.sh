#!/bin/sh
# http-flood.sh: the connection flood of issue 24 against a real denv-cp with
# a joined denvd. FLOOD_CONNS (1,100) TCP connections from FLOOD_ADDRS (49)
# loopback addresses, 127.0.0.2 up, each re-opened the moment the server
# drops it, each flood for at most FLOOD_SECS (90) seconds.
# 1. Silent connections: curl with the API key (from 127.0.0.1) is answered
#    every time; denv-cp logged evictions (so the flood did fill it); denvd
#    is stopped (GET /v1/hosts: disconnected), started again, and shows
#    connected again, all while the flood holds.
# 2. Busy connections (a POST head, then its body a byte at a time): every
#    main slot is taken, so curl gets 503 with Retry-After (the real
#    limit), and a restarted denvd still reconnects through the reserve.
# Latencies go in TAP comments, not asserts. Loopback only. Prints TAP.
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

# The flood: MODE silent (connect, then nothing) or busy (a complete head
# of a POST with a 1 MB body, then a body byte every 5 s: each connection
# busy, never idle long enough for the body deadline). Every connection the
# server drops or answers is re-opened at once. Writes "open K reopened R"
# to its stats file twice a second; stops at the stop file or after SECS.
cat >"$tmp/flood.py" <<'EOF'
import os, selectors, socket, sys, time
port, n, addrs, secs, stats, stop, mode = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                           float(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7])
HEAD = b"POST /v1/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"
sel = selectors.DefaultSelector()
reopened = 0
def dial(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    # Pick the port at connect time, clear of the server's TIME_WAIT pairs
    # (a port picked at bind time may collide and cost a SYN retransmit).
    s.setsockopt(socket.IPPROTO_IP, getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24), 1)
    try:
        s.bind(("127.0.0.%d" % (2 + i % addrs), 0))
        s.connect_ex(("127.0.0.1", port))
    except OSError:
        s.close()
        return
    sel.register(s, selectors.EVENT_WRITE if mode == "busy" else selectors.EVENT_READ, i)
for i in range(n):
    dial(i)
end = time.time() + secs
last = trickled = time.time()
while time.time() < end and not os.path.exists(stop):
    for key, ev in sel.select(0.1):
        s = key.fileobj
        if ev & selectors.EVENT_WRITE:
            try:
                s.send(HEAD)
                sel.modify(s, selectors.EVENT_READ, key.data)
                continue
            except OSError:
                pass
        else:
            try:
                s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                pass
        # Dropped (or answered): re-open it at once, as an attacker would.
        sel.unregister(s)
        s.close()
        reopened += 1
        dial(key.data)
    now = time.time()
    if mode == "busy" and now - trickled > 5:
        trickled = now
        for key in list(sel.get_map().values()):
            if key.events == selectors.EVENT_READ:
                try:
                    key.fileobj.send(b" ")
                except OSError:
                    pass
    if now - last > 0.5:
        last = now
        with open(stats + ".new", "w") as f:
            f.write("open %d reopened %d\n" % (len(sel.get_map()), reopened))
        os.replace(stats + ".new", stats)
EOF
# start_flood MODE: the flood above, in the background; waits until every
# connection is dialled and a second more for the server to take them in.
start_flood() {
	rm -f "$tmp/stop" "$tmp/flood.stats"
	python3 "$tmp/flood.py" "$port" "$N" "$A" "$SECS" "$tmp/flood.stats" "$tmp/stop" "$1" 2>>"$tmp/flood.err" &
	flood_pid=$!
	i=0
	until grep -q "^open $N " "$tmp/flood.stats" 2>/dev/null || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
	sleep 1
	echo "# $1 flood: $(cat "$tmp/flood.stats" 2>/dev/null) ($N connections from $A addresses)"
}
stop_flood() {
	touch "$tmp/stop"
	wait "$flood_pid" 2>/dev/null
	flood_pid=
	sleep 0.5
}

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
# restart_denvd LOG: start denvd again with its saved identity.
restart_denvd() {
	"$top/bin/denvd" run --server "$DENV_SERVER" --state "$tmp/host.json" --data "$tmp/data" \
		--probe-url http://192.0.2.1/ >"$1" 2>&1 &
	stack_sc_pid=$!
}
stop_denvd() {
	kill "$stack_sc_pid" 2>/dev/null
	wait "$stack_sc_pid" 2>/dev/null
	stack_sc_pid=
}

# ---- 1. silent connections (the attack of issue 24) ----
start_flood silent
# (the old server answered 503 to 96% of requests from here on)
good=0 worst=0
for k in $(seq 1 $CURLS); do
	out=$(curl -sS -o /dev/null -m 10 -w '%{http_code} %{time_total}' \
		-H "Authorization: Bearer $DENV_API_KEY" "$DENV_SERVER/v1/me" 2>>"$tmp/curl.err")
	[ "${out%% *}" = 200 ] && good=$((good + 1))
	worst=$(echo "$worst ${out#* }" | awk '{ print ($2 > $1 ? $2 : $1) }')
done
[ $good -eq $CURLS ]
ok $? "silent flood: curl with the API key answered 200 $good/$CURLS times"
echo "# slowest of the $CURLS requests: ${worst}s"
grep -q "connection limits: [1-9][0-9]* evicted" "$tmp/cp.log"
ok $? "the flood filled the server: denv-cp evicted waiting connections"

stop_denvd
i=0
while [ "$(hoststate)" != disconnected ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
[ "$(hoststate)" = disconnected ]
ok $? "denvd stopped: GET /v1/hosts shows the host disconnected"
t0=$(date +%s.%N)
restart_denvd "$tmp/denvd2.log"
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
stop_flood
out=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $DENV_API_KEY" "$DENV_SERVER/v1/me")
[ "$out" = 200 ]
ok $? "served after the flood"

# ---- 2. busy connections: every main slot holds a request body in progress ----
start_flood busy
# The real limit: a normal client is refused, and told when to come back.
# (Tried until the flood has every slot: its connections take a moment.)
code=000 k=0
while [ "$code" != 503 ] && [ $k -lt 40 ]; do
	code=$(curl -sS -D "$tmp/h" -o /dev/null -m 10 -w '%{http_code}' \
		-H "Authorization: Bearer $DENV_API_KEY" "$DENV_SERVER/v1/me" 2>>"$tmp/curl.err")
	k=$((k + 1))
	[ "$code" = 503 ] || sleep 0.25
done
[ "$code" = 503 ] && grep -qi '^retry-after: [0-9]' "$tmp/h"
ok $? "busy flood: a normal client gets 503 with Retry-After (after $k tries)"
# The sidecar still gets in, through the reserve.
n0=$(grep -c "hub: host .* reconnected" "$tmp/cp.log")
stop_denvd
t0=$(date +%s.%N)
restart_denvd "$tmp/denvd3.log"
end=$(($(date +%s) + 30))
until [ "$(grep -c "hub: host .* reconnected" "$tmp/cp.log")" -gt "$n0" ] || [ "$(date +%s)" -ge $end ]; do
	sleep 0.2
done
[ "$(grep -c "hub: host .* reconnected" "$tmp/cp.log")" -gt "$n0" ] && kill -0 "$flood_pid" 2>/dev/null
ok $? "busy flood: denvd started again reconnects (denv-cp's log), the flood still running"
echo "# reconnected after $(echo "$(date +%s.%N) $t0" | awk '{ printf "%.2f", $1 - $2 }') s;" \
	"attempts: $(grep -c 'connecting to' "$tmp/denvd3.log")"
grep -E "warn|stream closed" "$tmp/denvd3.log" | sed 's/^/# denvd: /'
echo "# flood: $(cat "$tmp/flood.stats" 2>/dev/null)"
n1=$(grep -c "hub: host .* reconnected" "$tmp/cp.log")
stop_flood
connected && [ "$(grep -c "hub: host .* reconnected" "$tmp/cp.log")" = "$n1" ]
ok $? "after the flood GET /v1/hosts shows it connected, on the stream it opened during the flood"
grep "connection limits" "$tmp/cp.log" | tail -n 2 | sed 's/^/# /'

if [ $failed -ne 0 ]; then
	tail -n 20 "$tmp/cp.log" | sed 's/^/# cp: /'
	tail -n 10 "$tmp/denvd2.log" 2>/dev/null | sed 's/^/# denvd: /'
	tail -n 10 "$tmp/denvd3.log" 2>/dev/null | sed 's/^/# denvd: /'
	sed 's/^/# curl: /' "$tmp/curl.err" 2>/dev/null | tail -n 5
	sed 's/^/# flood: /' "$tmp/flood.err" | tail -n 5
fi
echo "1..$t"
exit $failed
