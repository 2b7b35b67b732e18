#!/bin/sh
# http-slowloris.sh: 200 connections each trickle a request head one byte at
# a time (never idle, never complete). Meanwhile a normal client must get its
# answers, and every slow connection must be dropped once the header timeout
# (2 s here) has passed since its first byte. The slow connections come
# from 127.0.0.2..11 (20 each, within the per-address cap), the normal
# client from 127.0.0.1. Prints TAP. Loopback only.
set -u
B=${DENV_BUILD:-$PWD/build}
SRV="$B/helpers/http-testserver"
CLI="$B/helpers/http-client"
T=$(mktemp -d)
spid=

cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT INT TERM

if [ ! -x "$SRV" ] || [ ! -x "$CLI" ]; then
	echo "1..0 # SKIP helpers not built in $B"
	exit 0
fi

"$SRV" -header-timeout 2000 >"$T/srv.out" 2>"$T/srv.err" &
spid=$!
port=
i=0
while [ -z "$port" ] && [ $i -lt 400 ]; do
	sleep 0.05
	port=$(sed -n 's/^port //p' "$T/srv.out" 2>/dev/null)
	i=$((i + 1))
done
[ -n "$port" ] || { echo "not ok 1 - server starts: $(cat "$T/srv.err")"; echo "1..1"; exit 1; }

python3 - "$port" "$CLI" <<'EOF'
import socket, subprocess, sys, time

port, cli = int(sys.argv[1]), sys.argv[2]
N, TIMEOUT = 200, 2.0
n = 0
failed = False

def ok(cond, name):
    global n, failed
    n += 1
    print(("ok" if cond else "not ok"), n, "-", name)
    failed |= not cond

socks, started, closed_at = [], [], {}
for i in range(N):
    s = socket.create_connection(("127.0.0.1", port), 2, source_address=("127.0.0.%d" % (2 + i % 10), 0))
    s.setblocking(False)
    s.send(b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    socks.append(s)
    started.append(time.time())

def trickle():
    now = time.time()
    for i, s in enumerate(socks):
        if i in closed_at:
            continue
        try:
            d = s.recv(4096)
            if d == b"":
                closed_at[i] = now - started[i]
                continue
        except BlockingIOError:
            pass
        except OSError:
            closed_at[i] = now - started[i]
            continue
        try:
            s.send(b"a")
        except BlockingIOError:
            pass
        except OSError:
            closed_at[i] = now - started[i]

# Keep trickling for a while, then run a normal client among them.
t_end = time.time() + 0.6
while time.time() < t_end:
    trickle()
    time.sleep(0.2)
ok(len(closed_at) == 0, "slow connections still open while under the header timeout (%d closed)" % len(closed_at))
t0 = time.time()
r = subprocess.run([cli, "-t", "5000"] + ["http://127.0.0.1:%d/hello" % port] * 5,
                   capture_output=True, text=True, timeout=20)
took = time.time() - t0
ok(r.returncode == 0 and r.stdout.count("status 200") == 5,
   "a normal client gets its 5 answers among %d slow connections (%.2f s)" % (N, took))
ok(took < TIMEOUT, "  well within the header timeout")

deadline = time.time() + TIMEOUT + 6
while time.time() < deadline and len(closed_at) < N:
    trickle()
    time.sleep(0.2)
ok(len(closed_at) == N, "all %d trickling connections dropped (%d)" % (N, len(closed_at)))
early = [t for t in closed_at.values() if t < TIMEOUT - 0.3]
ok(not early, "none dropped before the header timeout (%d early)" % len(early))
if closed_at:
    print("# dropped after %.2f..%.2f s" % (min(closed_at.values()), max(closed_at.values())))
r = subprocess.run([cli, "http://127.0.0.1:%d/hello" % port], capture_output=True, text=True, timeout=20)
ok(r.returncode == 0 and "status 200" in r.stdout, "server still serves afterwards")
print("1..%d" % n)
sys.exit(1 if failed else 0)
EOF
