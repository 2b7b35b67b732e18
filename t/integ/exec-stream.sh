#!/bin/sh
# exec-stream.sh: the streamed exec (GET /v1/envs/{env}/exec/stream) through
# the real denv-cp, a joined denvd and Docker, as bin/denv uses it: output
# arrives while the command runs (checked by arrival order, not by time: the
# command waits for a marker the test makes only after it has read the first
# line), stdout and stderr keep their order, all 256 byte values and a 1 MiB
# random file come through intact, exit codes (the command's, 124, 125),
# --json still answers the one-shot object, and a client killed mid-stream
# leaves denv-cp answering and its command killed. XS_RSS_MAX_KB raises
# the bound on denv-cp's memory for sanitizer builds (default 200000).
suite=exec-stream
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
pids=
suite_cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; }

suite_need_stack all
stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined"

denv project create xs >/dev/null
cat >"$tmp/compose.yaml" <<'YAML'
services:
  box:
    image: denv-test/busybox:latest
    user: "1000:1000"
    command: ["sleep", "infinity"]
YAML
denv deploy --project xs --env s1 -f "$tmp/compose.yaml" >"$tmp/deploy.log" 2>&1
ok $? "deploy xs/s1"
env_id=$(denv env get xs/s1 | stack_json 'd["environment"]["ID"]')
ctr=$(docker ps -q --filter "label=com.docker.compose.project=$(echo "$env_id" | tr 'A-Z' 'a-z')" \
	--filter label=com.docker.compose.service=box | head -n 1)
[ -n "$ctr" ]
ok $? "the box's container found"

# ---- arrival order: "a" is read before the command can end ----
mkfifo "$tmp/fifo"
denv exec --service box xs/s1 -- sh -c \
	'echo a; i=0; while [ ! -e /tmp/seen ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; [ -e /tmp/seen ] && echo b || echo no-marker' \
	>"$tmp/fifo" 2>"$tmp/err" &
cli=$!
(sleep 60; kill "$cli" 2>/dev/null) &
dog=$!
pids="$pids $dog"
{
	read -r first
	[ "$first" = a ] && docker exec "$ctr" touch /tmp/seen
	cat >"$tmp/rest"
} <"$tmp/fifo"
wait "$cli"
rc=$?
kill "$dog" 2>/dev/null
[ "$first" = a ]
ok $? "the first line arrives while the command waits (got '$first')"
[ "$(cat "$tmp/rest")" = b ]
ok $? "the second line after the marker was seen (got '$(cat "$tmp/rest")')"
is_rc 0 "and the command's code"

# ---- streams: each in order, on its own fd; interleaving kept ----
run exec --service box xs/s1 -- sh -c 'echo o1; echo e1 >&2; echo o2; echo e2 >&2; exit 3'
is_rc 3 "the command's exit code"
[ "$(cat "$tmp/out")" = "o1
o2" ] && [ "$(cat "$tmp/err")" = "e1
e2" ]
ok $? "stdout and stderr each in order, each on its own"
denv exec --service box xs/s1 -- sh -c 'echo o1; sleep 0.3; echo e1 >&2; sleep 0.3; echo o2; sleep 0.3; echo e2 >&2' \
	>"$tmp/out" 2>&1
[ "$(cat "$tmp/out")" = "o1
e1
o2
e2" ]
ok $? "stdout and stderr interleaved as written"

# ---- bytes are bytes ----
i=0
while [ $i -lt 256 ]; do
	# shellcheck disable=SC2059
	printf "\\$(printf %03o $i)"
	i=$((i + 1))
done >"$tmp/all256"
head -c 1048576 /dev/urandom >"$tmp/rand"
docker cp "$tmp/all256" "$ctr:/tmp/all256" && docker cp "$tmp/rand" "$ctr:/tmp/rand"
ok $? "test files copied in"
[ "$(wc -c <"$tmp/all256")" -eq 256 ]
ok $? "the local file has 256 bytes"
denv exec --service box xs/s1 -- cat /tmp/all256 >"$tmp/got" 2>"$tmp/err"
cmp -s "$tmp/all256" "$tmp/got"
ok $? "all 256 byte values round-trip on stdout"
denv exec --service box xs/s1 -- sh -c 'cat /tmp/all256 >&2' >"$tmp/out" 2>"$tmp/got"
cmp -s "$tmp/all256" "$tmp/got" && [ ! -s "$tmp/out" ]
ok $? "and on stderr"
denv exec --service box xs/s1 -- cat /tmp/rand >"$tmp/got" 2>"$tmp/err"
cmp -s "$tmp/rand" "$tmp/got"
ok $? "1 MiB of random bytes (many frames) intact"
denv exec --service box xs/s1 -- sh -c 'head -c 65536 /dev/zero; head -c 65536 /dev/zero >&2' >"$tmp/out" 2>"$tmp/got"
[ "$(wc -c <"$tmp/out")" -eq 65536 ] && [ "$(wc -c <"$tmp/got")" -eq 65536 ] && [ "$(tr -d '\000' <"$tmp/out" | wc -c)" -eq 0 ]
ok $? "NULs on stdout and stderr, every one"

# ---- codes ----
run exec --timeout 1 --service box xs/s1 -- sleep 30
is_rc 124 "past --timeout: 124"
grep -q "^denv: .*timed out" "$tmp/err"
ok $? "with a denv: line saying so"
run exec --service nosuch xs/s1 -- true
is_rc 125 "no such service: 125"
grep -q '^denv: .*no service "nosuch"' "$tmp/err"
ok $? "with the host's reason"
run exec --json --service box xs/s1 -- sh -c 'echo j; exit 4'
is_rc 0 "--json: exit 0"
[ "$(stack_json 'd["exit_code"] == 4 and d["stdout"] == "j\n"' <"$tmp/out")" = True ]
ok $? "--json: the one-shot object"
DENV_NO_STREAM=1 denv exec --service box xs/s1 -- sh -c 'echo old; exit 5' >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 5 ] && [ "$(cat "$tmp/out")" = old ]
ok $? "DENV_NO_STREAM=1: the one-shot exec, same output and code"

DENV_NO_STREAM=1 denv exec --service box xs/s1 -- printf 'a\000b' >"$tmp/got" 2>"$tmp/err"
printf 'a\000b' | cmp -s - "$tmp/got"
ok $? "the one-shot exec keeps a NUL byte too"
DENV_NO_STREAM=1 denv exec --service box xs/s1 -- sh -c 'head -c 1048576 /dev/zero; head -c 1048576 /dev/zero >&2' \
	>"$tmp/out" 2>"$tmp/got"
rc=$?
[ "$rc" -eq 0 ] && [ "$(wc -c <"$tmp/out")" -eq 1048576 ] && [ "$(wc -c <"$tmp/got")" -eq 1048576 ]
ok $? "and 1 MiB of NULs on stdout and on stderr (exit $rc)"

# ---- a client that goes away mid-stream ----
rm -f "$tmp/out"
denv exec --service box xs/s1 -- sh -c \
	'i=0; while [ $i -lt 30 ]; do echo x; sleep 0.1; i=$((i+1)); done; touch /tmp/finished' \
	>"$tmp/out" 2>"$tmp/err" &
cli=$!
n=0
until grep -q x "$tmp/out" 2>/dev/null || [ $n -ge 100 ]; do sleep 0.1; n=$((n + 1)); done
kill -9 "$cli"
wait "$cli" 2>/dev/null
grep -q x "$tmp/out" && ! docker exec "$ctr" test -e /tmp/finished
ok $? "output arrived before the client was killed mid-command"
denv host list >/dev/null 2>&1
ok $? "denv-cp still answers"
# Killed or run to its end, the loop leaves ps; only the end makes the file.
n=0
while docker exec "$ctr" ps | grep -q 'touch /tmp/finished' && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
! docker exec "$ctr" test -e /tmp/finished
ok $? "the command was killed with its client (it did not reach its end)"
run exec --service box xs/s1 -- echo after
[ "$rc" -eq 0 ] && [ "$(cat "$tmp/out")" = after ]
ok $? "the next exec streams as before"
kill -0 "$stack_cp_pid" && kill -0 "$stack_sc_pid"
ok $? "denv-cp and denvd still run"

# ---- a client that stops reading is dropped, not buffered for ----
"$PY" - "$DENV_SERVER" "$env_id" >"$tmp/slow" 2>&1 <<'PYEOF'
import json, os, socket, sys, time, base64
host, port = sys.argv[1].split("//")[1].split(":")
s = socket.create_connection((host, int(port)))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall((f"GET /v1/envs/{sys.argv[2]}/exec/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
           f"Authorization: Bearer {os.environ['DENV_API_KEY']}\r\n\r\n").encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
assert b" 101 " in head, head
msg = json.dumps({"service": "box", "cmd": ["sh", "-c", "head -c 67108864 /dev/zero"], "timeout_sec": 60}).encode()
mask = os.urandom(4)
s.sendall(bytes([0x81, 0xFE]) + len(msg).to_bytes(2, "big") + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(msg)))
time.sleep(8)  # never read meanwhile
s.settimeout(10)
data = b""
try:
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        data += b
except socket.timeout:
    pass
# Dropped: the socket ends long before 64 MiB (about 87 MiB as frames) came.
print("dropped" if len(data) < 64 << 20 else "not dropped", len(data), b"fell behind" in data)
PYEOF
grep -q "^dropped" "$tmp/slow" && grep -q "exec stream of .*fell behind" "$tmp/cp.log"
ok $? "a client that does not read is dropped with exec.error ($(head -c 200 "$tmp/slow"))"
denv host list >/dev/null 2>&1 && kill -0 "$stack_cp_pid"
ok $? "denv-cp still answers after it"
rss=$(awk '/VmRSS/ {print $2}' "/proc/$stack_cp_pid/status")
[ "${rss:-999999}" -lt "${XS_RSS_MAX_KB:-200000}" ]
ok $? "denv-cp's memory stays bounded (${rss:-?} kB resident)"

# ---- the Python client (denv.stream) ----
rm -f "$tmp/py.marker"
PYTHONPATH=$top/python "$PY" - "$env_id" "$ctr" >"$tmp/py" 2>&1 <<'PYEOF'
import subprocess, sys
from denv.client import Client
from denv.stream import exec_stream
env, ctr = sys.argv[1], sys.argv[2]
c = Client()
script = ("echo a; i=0; while [ ! -e /tmp/pyseen ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; "
          "[ -e /tmp/pyseen ] || exit 9; cat /tmp/all256 >&2; exit 7")
s = exec_stream(c, env, "box", ["sh", "-c", script], timeout_sec=60)
got = {"stdout": b"", "stderr": b""}
for stream, data in s:
    if got["stdout"] == b"" and data == b"a\n":
        subprocess.run(["docker", "exec", ctr, "touch", "/tmp/pyseen"], check=True)
    got[stream] += data
print("order", got["stdout"] == b"a\n")
print("bytes", got["stderr"] == bytes(range(256)))
print("code", s.exit_code)
PYEOF
grep -q "order True" "$tmp/py" && grep -q "bytes True" "$tmp/py" && grep -q "code 7" "$tmp/py"
ok $? "Python denv.stream: output as it arrives (code 7 only if the marker came in time), 256 byte values ($(tr '\n' ' ' <"$tmp/py" | head -c 200))"

if [ -n "${XS_DEBUG:-}" ]; then
	grep -v heartbeat "$tmp/cp.log" | tail -n 30 | sed 's/^/# cp: /'
	tail -n 30 "$tmp/denvd.log" | sed 's/^/# sc: /'
fi
suite_done
