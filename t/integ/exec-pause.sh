#!/bin/sh
# exec-pause.sh: pause and resume (POST /v1/envs/{env}/pause, /resume,
# `denv pause`, `denv resume`, Client.pause/resume) through the real
# denv-cp, a joined denvd and Docker: every service or one is frozen (its
# processes stop making progress, a background command with them) and
# thawed with its memory and data; exec on a paused service says how to
# resume; a snapshot keeps what the user paused paused; events record both;
# and the TTL action pause freezes an idle sandbox instead of destroying it.
suite=exec-pause
. "${DENV_TOP:-$(pwd)}/t/lib/box.sh"
state() { docker inspect -f '{{.State.Status}}' "$1" 2>/dev/null; }
cat >"$tmp/compose.yaml" <<'YAML'
services:
  box:
    image: denv-test/busybox:latest
    command: ["sleep", "infinity"]
    volumes: ["work:/work"]
  side:
    image: denv-test/busybox:latest
    command: ["sleep", "infinity"]
volumes:
  work: {}
YAML
box_up pz p1 "$tmp/compose.yaml"
proj=$(echo "$env_id" | tr 'A-Z' 'a-z')
box=$(docker ps -q --filter "label=com.docker.compose.project=$proj" --filter label=com.docker.compose.service=box)
side=$(docker ps -q --filter "label=com.docker.compose.project=$proj" --filter label=com.docker.compose.service=side)
denv exec --service box pz/p1 -- sh -c 'echo kept >/work/data' >/dev/null 2>&1
# A background command that ticks into the volume: it stops while paused.
run bg start --service box pz/p1 -- sh -c 'while true; do echo t >>/work/tick; sleep 0.1; done'
bgid=$(cat "$tmp/out")
tick=$(find "$tmp/data/envs/$env_id" -name tick 2>/dev/null | head -n 1)
n=0
while [ -z "$tick" ] && [ $n -lt 50 ]; do
	n=$((n + 1)); sleep 0.1; tick=$(find "$tmp/data/envs/$env_id" -name tick 2>/dev/null | head -n 1)
done
[ -n "$tick" ]
ok $? "the ticker writes into the volume on the host ($tick)"

# ---- pause all ----
run pause pz/p1
[ "$rc" = 0 ] && [ "$(state "$box")" = paused ] && [ "$(state "$side")" = paused ]
ok $? "denv pause: both containers paused (exit $rc)"
[ "$(stack_json 'd["environment"]["Paused"], sorted(d["paused"])' <"$tmp/out")" = "True ['box', 'side']" ]
ok $? "the answer: Paused, and the services it paused"
a=$(wc -l <"$tick")
sleep 1
b=$(wc -l <"$tick")
[ "$a" = "$b" ]
ok $? "the ticker makes no progress while paused ($a then $b lines)"
run exec --service box pz/p1 -- true
[ "$rc" = 125 ] && grep -q 'is paused; resume it with `denv resume' "$tmp/err"
ok $? "exec on a paused service: 125, saying how to resume (exit $rc)"
api GET "/v1/envs/$env_id"
[ "$(j 'd["environment"]["Status"], d["environment"]["Paused"]')" = "running True" ]
ok $? "the environment is still running (no deployment), Paused true"
api GET "/v1/envs/$env_id/deployments"
ndeps=$(j 'len(d["deployments"])')

# ---- resume ----
t0=$(date +%s%N)
run resume pz/p1
t1=$(date +%s%N)
[ "$rc" = 0 ] && [ "$(state "$box")" = running ] && [ "$(state "$side")" = running ]
ok $? "denv resume: both running again (exit $rc)"
echo "# resume took $(((t1 - t0) / 1000000)) ms (CLI to answer)"
[ "$(stack_json 'd["environment"]["Paused"]' <"$tmp/out")" = False ]
ok $? "the answer: Paused false"
run exec --service box pz/p1 -- cat /work/data
[ "$rc" = 0 ] && [ "$(cat "$tmp/out")" = kept ]
ok $? "the data is there after resume"
c=$(wc -l <"$tick")
n=0
while [ "$c" = "$b" ] && [ $n -lt 50 ]; do n=$((n + 1)); sleep 0.1; c=$(wc -l <"$tick"); done
[ "$c" -gt "$b" ]
ok $? "the same ticker runs on ($b then $c lines)"
run bg status pz/p1 "$bgid"
[ "$(stack_json 'd["command"]["state"]' <"$tmp/out")" = running ]
ok $? "its background command is still running"
api GET "/v1/envs/$env_id/deployments"
[ "$(j 'len(d["deployments"])')" = "$ndeps" ]
ok $? "pause and resume made no deployment"
api GET "/v1/events?subject=env:$env_id"
[ "$(j '[e["Kind"] for e in reversed(d["events"]) if e["Kind"] in ("env.paused", "env.resumed")]')" = "['env.paused', 'env.resumed']" ]
ok $? "events: env.paused, then env.resumed"

# ---- one service ----
api POST "/v1/envs/$env_id/pause" '{"service":"side"}'
[ "$code" = 200 ] && [ "$(state "$side")" = paused ] && [ "$(state "$box")" = running ]
ok $? "pause of one service: side paused, box running (code $code)"
api POST "/v1/envs/$env_id/pause" '{"service":"nope"}'
[ "$code" = 404 ] && grep -q 'has no service' "$tmp/out"
ok $? "an unknown service is 404 (code $code)"

# ---- a snapshot keeps the user's pause ----
denv snapshot --wait pz/p1 >"$tmp/snap.log" 2>&1
ok $? "snapshot of a partly paused environment succeeds"
[ "$(state "$side")" = paused ] && [ "$(state "$box")" = running ]
ok $? "after it, side is still paused and box running"
PYTHONPATH=$top/python "$PY" - "$env_id" >"$tmp/out" 2>"$tmp/err" <<'PYEOF'
import sys
from denv import Client
c = Client()
r = c.resume(sys.argv[1], service="side")
assert r["resumed"] == ["side"] and r["environment"]["Paused"] is False, r
r = c.pause(sys.argv[1], service="box")
assert r["paused"] == ["box"], r
assert c.resume(sys.argv[1])["resumed"] == ["box"]
print("py ok")
PYEOF
[ "$(cat "$tmp/out")" = "py ok" ] && [ "$(state "$side")" = running ] && [ "$(state "$box")" = running ]
ok $? "Python: Client.resume(service=), pause(service=), resume()"

# ---- the TTL action pause ----
api POST /v1/sandboxes '{"image":"denv-test/busybox:latest","cmd":["sleep","3600"],"name":"ttlp","idle_ttl_sec":2,"ttl_action":"pause"}'
sb=$(j 'd["environment"]["ID"]')
[ "$code" = 201 ] && [ "$(j 'd["environment"]["TTLAction"]')" = pause ]
ok $? "a sandbox with idle_ttl_sec 2 and ttl_action pause (code $code)"
sbc=$(docker ps -q --filter "label=com.docker.compose.project=$(echo "$sb" | tr 'A-Z' 'a-z')" | head -n 1)
n=0
until [ "$(state "$sbc")" = paused ] || [ $n -ge 60 ]; do n=$((n + 1)); sleep 0.5; done
[ "$(state "$sbc")" = paused ]
ok $? "the reaper paused it once idle"
api GET "/v1/envs/$sb"
[ "$(j 'd["environment"]["Status"], d["environment"]["Paused"], d["environment"]["PausedReason"]')" = "running True ttl: idle 2 s exceeded" ]
ok $? "not destroyed: Paused, with the reason"
n=0
until api GET "/v1/events?subject=env:$sb" && j '[e for e in d["events"] if e["Kind"] == "ttl.paused"][0]["Body"]["reason"]' >"$tmp/reason" 2>/dev/null || [ $n -ge 20 ]; do n=$((n + 1)); sleep 0.25; done
[ "$(cat "$tmp/reason")" = "ttl: idle 2 s exceeded" ]
ok $? "a ttl.paused event with the reason"
sleep 3
api GET "/v1/envs/$sb"
[ "$(j 'd["environment"]["Status"]')" = running ]
ok $? "a paused sandbox is not reaped again by its idle TTL"
api POST "/v1/envs/$sb/resume"
[ "$code" = 200 ] && [ "$(state "$sbc")" = running ]
ok $? "resume thaws it (code $code)"

suite_done
