#!/bin/sh
# exec-tty.sh: stdin and a TTY on the streamed exec, as `denv exec -i` and
# `denv exec -it` use them, through the real denv-cp, a joined denvd and
# Docker: stdin's bytes (all 256 values) reach the command and its end
# closes the command's stdin; under -t the command has a terminal of our
# size, keys arrive as typed, a resize follows (checked by order: the
# command reads a line typed after the resize), and our terminal comes back
# as it was; a streamed exec holds one of the team's exec slots (429 at the
# quota, free again after).
suite=exec-tty
. "${DENV_TOP:-$(pwd)}/t/lib/box.sh"
cat >"$tmp/compose.yaml" <<'YAML'
services:
  box:
    image: denv-test/busybox:latest
    user: "1000:1000"
    command: ["sleep", "infinity"]
YAML
box_up tt t1 "$tmp/compose.yaml"

# ---- -i: stdin's bytes, and its end ----
"$PY" -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 64)' >"$tmp/all"
denv exec -i --service box tt/t1 -- cat <"$tmp/all" >"$tmp/got" 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] && cmp -s "$tmp/all" "$tmp/got"
ok $? "-i: 16 KiB of all 256 byte values through cat, intact (exit $rc)"
head -c 3000000 /dev/urandom >"$tmp/big"
denv exec -i --service box tt/t1 -- sh -c 'cat | md5sum' <"$tmp/big" >"$tmp/out" 2>"$tmp/err"
[ "$(cut -d' ' -f1 <"$tmp/out")" = "$(md5sum <"$tmp/big" | cut -d' ' -f1)" ]
ok $? "-i: 3 MB of random bytes, the same digest inside"
printf 'abc\n' | denv exec -i --service box tt/t1 -- sh -c 'cat; echo done' >"$tmp/out" 2>"$tmp/err"
[ "$(cat "$tmp/out")" = "abc
done" ]
ok $? "-i: the end of our stdin ends the command's (cat returns)"
denv exec --service box tt/t1 -- sh -c 'cat; echo no-stdin' </dev/zero >"$tmp/out" 2>"$tmp/err"
[ "$(cat "$tmp/out")" = no-stdin ]
ok $? "without -i the command's stdin is empty"

# ---- Python: denv.stream with stdin, and kill ----
PYTHONPATH=$top/python "$PY" - "$env_id" >"$tmp/out" 2>"$tmp/err" <<'PYEOF'
import sys
from denv import Client
from denv.stream import exec_stream
env = sys.argv[1]
c = Client()
s = exec_stream(c, env, "box", ["sh", "-c", "read a; echo got:$a; cat"], timeout_sec=60, stdin=True)
s.write(b"hi\n")
it = iter(s)
first = next(it)            # the answer to our line, before we send the rest
assert first == ("stdout", b"got:hi\n"), first
s.write(bytes(range(256)) * 200)
s.close_stdin()
rest = b"".join(d for _, d in it)
assert rest == bytes(range(256)) * 200, len(rest)
assert s.exit_code == 0, s.exit_code
k = exec_stream(c, env, "box", ["sleep", "300"], timeout_sec=600, stdin=True)
k.kill()
for _ in k:
    pass
assert k.exit_code not in (None, 0) and not k.timed_out, (k.exit_code, k.timed_out)
t = exec_stream(c, env, "box", ["sh", "-c", "sleep 0.5; stty size"], tty=True, rows=33, cols=77)
assert b"".join(d for _, d in t).strip() == b"33 77", "tty size"
print("py ok")
PYEOF
[ "$(cat "$tmp/out")" = "py ok" ]
ok $? "Python denv.stream: stdin answered in order, 51200 bytes back intact, kill ends it, tty of 33x77"

# ---- -it under a pseudo-terminal ----
"$PY" - "$top/bin/denv" "$env_id" >"$tmp/pty.log" 2>&1 <<'PYEOF'
import fcntl, os, pty, select, struct, sys, termios, time
denv, env = sys.argv[1], sys.argv[2]

def setsize(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

# The sleep: dockerd 20.10 (API 1.41) sizes an exec's TTY only after it
# started (ConsoleSize came in 1.42), like `docker exec -t` there.
pid, fd = pty.fork()
if pid == 0:
    setsize(0, 30, 100)
    os.execv(denv, [denv, "exec", "-it", "--service", "box", env, "--",
                    "sh", "-c", "tty; sleep 0.5; stty size; read a; echo got:$a; stty size; exit 3"])
setsize(fd, 30, 100)
out = b""
def until(want, secs=30):
    global out
    end = time.time() + secs
    while want not in out and time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.5)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
    return want in out
ok1 = until(b"30 100")
print("tty:", b"/dev/pts/" in out, "size:", ok1)
setsize(fd, 40, 120)          # the kernel sends denv SIGWINCH
os.kill(pid, 28)              # and once more, in case it came before the handler
time.sleep(0.5)
os.write(fd, b"hi\r")
ok2 = until(b"40 120")
print("typed:", b"got:hi" in out, "resized:", ok2)
_, status = os.waitpid(pid, 0)
print("exit:", os.waitstatus_to_exitcode(status))
sys.stderr.write(repr(out) + "\n")
PYEOF
grep -q "tty: True size: True" "$tmp/pty.log"
ok $? "-it: the command has a terminal of our size (30x100)"
grep -q "typed: True" "$tmp/pty.log"
ok $? "-it: a line typed on our terminal reaches it"
grep -q "resized: True" "$tmp/pty.log"
ok $? "-it: our resize reaches its terminal (40x120)"
grep -q "exit: 3" "$tmp/pty.log"
ok $? "-it: denv exits with the command's code"
# Our terminal is restored: a stty run after denv on the same pty sees cooked mode.
"$PY" - "$top/bin/denv" "$env_id" >"$tmp/pty2.log" 2>&1 <<'PYEOF'
import os, pty, sys
denv, env = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.system(f"{denv} exec -it --service box {env} -- true; stty -a | grep -o -- '-\\?icanon' | head -n 1")
    os._exit(0)
out = b""
while True:
    try:
        b = os.read(fd, 4096)
    except OSError:
        break
    if not b:
        break
    out += b
os.waitpid(pid, 0)
print(out.decode(errors="replace"))
PYEOF
grep -q '^icanon' "$tmp/pty2.log" || grep -q '[^-]icanon' "$tmp/pty2.log"
ok $? "-it: our terminal is back in canonical mode after denv"

# ---- a streamed exec counts toward the exec quota ----
team=$(curl -s "$DENV_SERVER/v1/me" -H "Authorization: Bearer $DENV_API_KEY" | stack_json 'd["team"]["ID"]')
api PUT "/v1/teams/$team/quotas" '{"max_exec":1}'
[ "$code" = 200 ]
ok $? "max_exec 1 set (code $code)"
denv exec --service box tt/t1 -- sleep 4 >/dev/null 2>&1 &
slow=$!
i=0
until api GET "/v1/teams/$team/quotas" && [ "$(stack_json 'd["use"]["exec"]' <"$tmp/out")" = 1 ] || [ $i -ge 50 ]; do
	i=$((i + 1)); sleep 0.1
done
[ $i -lt 50 ]
ok $? "the streamed exec holds the slot"
code=$(curl -s -o "$tmp/out" -w '%{http_code}' -H "Authorization: Bearer $DENV_API_KEY" -H 'Connection: Upgrade' \
	-H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' \
	"$DENV_SERVER/v1/envs/$env_id/exec/stream")
[ "$code" = 429 ] && grep -q 'quota exceeded: execs in flight 1 of 1' "$tmp/out"
ok $? "a second stream: 429 before the upgrade (code $code)"
denv exec --service box tt/t1 -- true >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" = 125 ] && grep -q 'quota exceeded' "$tmp/err"
ok $? "denv exec meanwhile: 125, quota exceeded (exit $rc)"
wait "$slow"
denv exec --service box tt/t1 -- echo free >"$tmp/out" 2>"$tmp/err"
[ "$(cat "$tmp/out")" = free ]
ok $? "after it ended the slot is free again"
api PUT "/v1/teams/$team/quotas" '{"max_exec":null}'

suite_done
