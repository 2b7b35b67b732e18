#!/bin/sh
# exec-bg.sh: background commands (POST /v1/envs/{env}/commands and the
# routes under it, `denv bg`) through the real denv-cp, a joined denvd and
# Docker: the command runs on after the client that started it has exited
# and its output (bytes, NUL and 0xff intact) is read later, from offsets;
# list, status, wait (with the command's code, and a timeout), kill of a
# whole process tree, errors for unknown ids, and the commands die with the
# environment (their supervisors on the host too).
suite=exec-bg
. "${DENV_TOP:-$(pwd)}/t/lib/box.sh"
cat >"$tmp/compose.yaml" <<'YAML'
services:
  box:
    image: denv-test/busybox:latest
    user: "1000:1000"
    command: ["sleep", "infinity"]
YAML
box_up bg b1 "$tmp/compose.yaml"

# ---- output read after the starting client has gone ----
# The command waits for a marker the test makes only once the client has exited.
run bg start --service box bg/b1 -- sh -c \
	'echo one; printf "a\000b\377\n" >&2; i=0; while [ ! -e /tmp/go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo two; exit 7'
id=$(cat "$tmp/out")
[ "$rc" = 0 ] && case $id in bg_*) true ;; *) false ;; esac
ok $? "bg start answers an id at once and exits (got '$id')"
run bg status bg/b1 "$id"
[ "$(stack_json 'd["command"]["state"]' <"$tmp/out")" = running ]
ok $? "status: running after the client exited"
docker exec "$ctr" touch /tmp/go
run bg wait --timeout 60 bg/b1 "$id"
[ "$rc" = 7 ]
ok $? "bg wait exits with the command's code (exit $rc, want 7)"
run bg output bg/b1 "$id"
[ "$(cat "$tmp/out")" = "one
two" ]
ok $? "stdout recorded while nobody was attached"
printf 'a\000b\377\n' >"$tmp/want-err"
cmp -s "$tmp/err" "$tmp/want-err"
ok $? "stderr's bytes intact (NUL, 0xff)"

# ---- bg output -f: what comes, as it comes, until the end ----
run bg start --service box bg/b1 -- sh -c \
	'echo first; i=0; while [ ! -e /tmp/go3 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo second'
idf=$(cat "$tmp/out")
mkfifo "$tmp/ffifo"
denv bg output -f bg/b1 "$idf" >"$tmp/ffifo" 2>"$tmp/err" &
fpid=$!
{
	read -r l1
	[ "$l1" = first ] && docker exec "$ctr" touch /tmp/go3
	cat >"$tmp/frest"
} <"$tmp/ffifo"
wait "$fpid"
frc=$?
[ "$l1" = first ] && [ "$(cat "$tmp/frest")" = second ] && [ "$frc" = 0 ]
ok $? "bg output -f: the first line before the command could end, the rest after, then exit 0 (got '$l1', exit $frc)"

# ---- the REST shape: offsets, sizes, done ----
api GET "/v1/envs/$env_id/commands/$id/output?stdout_offset=4&stderr_offset=1"
[ "$code" = 200 ] && [ "$(j 'd["command"]["encoding"]')" = base64 ] &&
	[ "$(j '__import__("base64").b64decode(d["command"]["stdout"]).decode()')" = two ] && [ "$(j 'd["command"]["stdout_offset"], d["command"]["stdout_bytes"], d["command"]["stderr_offset"]')" = "8 8 5" ]
ok $? "output from offsets: the rest, and the next offsets (code $code)"
[ "$(j 'd["command"]["done"], d["command"]["exit_code"], d["command"]["state"]')" = "True 7 exited" ]
ok $? "the answer says done, exit 7, exited"
api GET "/v1/envs/$env_id/commands"
[ "$code" = 200 ] && [ "$(j '[c["id"] for c in d["commands"]]')" = "['$id', '$idf']" ]
ok $? "list names both commands, oldest first (code $code)"
api GET "/v1/envs/$env_id/commands/bg_01JD3W5ZQ9X4M8B2Y7C6V0T1RS"
[ "$code" = 404 ] && grep -q 'no background command' "$tmp/out"
ok $? "an unknown id is 404 (code $code)"
api GET "/v1/envs/$env_id/commands/nonsense/output"
[ "$code" = 404 ]
ok $? "a malformed id is 404 (code $code)"
api POST "/v1/envs/$env_id/commands" '{"service":"box","cmd":[]}'
[ "$code" = 400 ]
ok $? "an empty cmd is 400 (code $code)"
api POST "/v1/envs/$env_id/commands/$id/signal" '{"signal":"TERM"}'
[ "$code" = 409 ] && grep -q 'has ended' "$tmp/out"
ok $? "signalling an ended command is 409 (code $code)"
api POST "/v1/envs/$env_id/commands/$id/signal" '{"signal":"NOPE"}'
[ "$code" = 409 ] || [ "$code" = 400 ]
ok $? "an unknown signal is refused (code $code)"

# ---- wait with a timeout; kill takes the whole tree ----
run bg start --service box bg/b1 -- sh -c 'sleep 300 | cat'
id2=$(cat "$tmp/out")
run bg wait --timeout 1 bg/b1 "$id2"
[ "$rc" = 124 ]
ok $? "bg wait --timeout 1 on a long command: 124 (exit $rc)"
docker exec "$ctr" ps >"$tmp/ps1"
grep -q 'sleep 300' "$tmp/ps1"
ok $? "its processes run in the container"
run bg kill bg/b1 "$id2"
[ "$rc" = 0 ] && [ "$(stack_json 'd["command"]["done"]' <"$tmp/out")" = True ]
ok $? "bg kill: the answer says it has ended"
docker exec "$ctr" ps >"$tmp/ps2"
! grep -q 'sleep 300' "$tmp/ps2" && ! grep -q ' cat$' "$tmp/ps2"
ok $? "sleep and cat are gone (the tree was killed, not only sh)"

# ---- an idempotent start: same key, same command ----
api POST "/v1/envs/$env_id/commands" '{"service":"box","cmd":["true"]}'
first=$(j 'd["command"]["id"]')
code=$(curl -s -o "$tmp/out" -w '%{http_code}' -X POST -H "Authorization: Bearer $DENV_API_KEY" \
	-H 'Idempotency-Key: bg-k1' --data '{"service":"box","cmd":["sleep","1"]}' "$DENV_SERVER/v1/envs/$env_id/commands")
k1=$(j 'd["command"]["id"]')
code=$(curl -s -o "$tmp/out" -w '%{http_code}' -X POST -H "Authorization: Bearer $DENV_API_KEY" \
	-H 'Idempotency-Key: bg-k1' --data '{"service":"box","cmd":["sleep","1"]}' "$DENV_SERVER/v1/envs/$env_id/commands")
[ "$code" = 201 ] && [ "$(j 'd["command"]["id"]')" = "$k1" ] && [ "$k1" != "$first" ]
ok $? "a retried start with its Idempotency-Key answers the same id (code $code)"

# ---- Python: one client starts it and exits, a second reads it ----
PYTHONPATH=$top/python "$PY" - "$env_id" >"$tmp/py-id" 2>"$tmp/err" <<'PYEOF'
import sys
from denv import Client
c = Client()
print(c.start_command(sys.argv[1], "box", ["sh", "-c", "printf 'x\\000y'; sleep 1; printf '\\377z'"]))
c.close()
PYEOF
pyid=$(cat "$tmp/py-id")
PYTHONPATH=$top/python "$PY" - "$env_id" "$pyid" >"$tmp/out" 2>"$tmp/err" <<'PYEOF'
import sys
from denv import Client
env, cid = sys.argv[1], sys.argv[2]
c = Client()
assert any(x["id"] == cid for x in c.commands(env)), "listed"
done = c.wait_command(env, cid, timeout_sec=30)
assert done["done"] and done["exit_code"] == 0, done
o = c.command_output(env, cid)
assert o.stdout == b"x\0y\xffz", o.stdout
o2 = c.command_output(env, cid, stdout_offset=3)
assert o2.stdout == b"\xffz" and o2.stdout_offset == 5, (o2.stdout, o2.stdout_offset)
long = c.start_command(env, "box", ["sleep", "300"])
assert not c.wait_command(env, long, timeout_sec=1)["done"]
assert c.kill_command(env, long)["done"]
print("py ok")
PYEOF
[ "$(cat "$tmp/out")" = "py ok" ]
ok $? "Python: output read by a second client, bytes exact, offsets, wait, kill"

# ---- it outlives denvd: SIGKILL the agent mid-command, start it again ----
run bg start --service box bg/b1 -- sh -c \
	'echo before; i=0; while [ ! -e /tmp/go2 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo after'
id4=$(cat "$tmp/out")
kill -9 "$stack_sc_pid"
wait "$stack_sc_pid" 2>/dev/null
docker exec "$ctr" touch /tmp/go2
"$top/bin/denvd" run --server "$DENV_SERVER" --state "$tmp/host.json" --data "$tmp/data" \
	--probe-url http://192.0.2.1/ >>"$tmp/denvd.log" 2>&1 &
stack_sc_pid=$!
n=0
until denv host list 2>/dev/null | grep -q '"connected": true' || [ $n -ge 100 ]; do n=$((n + 1)); sleep 0.2; done
run bg wait --timeout 60 bg/b1 "$id4"
[ "$rc" = 0 ]
ok $? "after denvd was killed and restarted, the command ran to its end (exit $rc)"
run bg output bg/b1 "$id4"
[ "$(cat "$tmp/out")" = "before
after" ]
ok $? "and its whole output was kept, also what it wrote while denvd was down"

# ---- killed with the environment ----
run bg start --service box bg/b1 -- sleep 600
id3=$(cat "$tmp/out")
sup=$(stack_json 'd["supervisor_pid"]' <"$tmp/data/envs/$env_id/bg/$id3/state.json")
kill -0 "$sup" 2>/dev/null
ok $? "the command's supervisor runs on the host (pid $sup)"
denv env destroy bg/b1 >"$tmp/out" 2>"$tmp/err"
stack_wait_destroyed bg/b1 >/dev/null 2>&1
n=0
while kill -0 "$sup" 2>/dev/null && [ $n -lt 100 ]; do n=$((n + 1)); sleep 0.1; done
! kill -0 "$sup" 2>/dev/null
ok $? "destroy ends the command and its supervisor"
[ ! -e "$tmp/data/envs/$env_id/bg" ]
ok $? "and removes its records"

suite_done
