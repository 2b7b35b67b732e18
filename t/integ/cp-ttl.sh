#!/bin/sh
# cp-ttl.sh: sandbox TTLs against a real denv-cp and a joined denvd on real
# Docker (denv-cp(8), "TTLs"):
#   - bad idle_ttl_sec, max_ttl_sec and ttl_action values are 400s;
#   - a sandbox left alone past idle_ttl_sec is reaped: destroyed, its
#     containers gone, a ttl.reaped event and ReapedReason saying why,
#     while one kept busy with exec and touch stays (and goes once left);
#   - max_ttl_sec reaps a sandbox that is busy all along;
#   - a fork takes its own TTLs, else its source's, and is reaped alone;
#   - a deploy sets TTLs on a project's environment;
#   - PATCH /v1/envs/{env} changes a TTL; TTLs and expires_at survive a
#     denv-cp restart and the reaper acts on them afterwards.
# Every wait polls with a deadline; nothing asserts on wall time.
# Prints TAP; removes its containers, networks and data even on failure.
suite=cp-ttl
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"

# j FILTER: jq over the last answer.
j() { jq -r "$1" "$tmp/out"; }
# sandbox NAME EXTRA_JSON: a busybox sandbox; its id in $id.
sandbox() {
	api POST /v1/sandboxes "{\"image\":\"denv-test/busybox:latest\",\"cmd\":[\"sleep\",\"3600\"],\"name\":\"$1\"$2}"
	id=$(j '.environment.ID // empty')
	[ "$code" = 201 ] && [ -n "$id" ]
}
status_of() { api GET "/v1/envs/$1" && j '.environment.Status'; }
exec_in() { api POST "/v1/envs/$1/exec" '{"service":"main","cmd":["true"]}'; }
# containers ENV: how many containers Docker still has for the environment.
containers() {
	docker ps -aq --filter "label=com.docker.compose.project=$(echo "$1" | tr 'A-Z' 'a-z')" | wc -l
}
# reaped ENV WANT_REASON: the row and the event agree on why, and Docker has nothing left.
reaped() {
	api GET "/v1/envs/$1"
	[ "$(j .environment.Status)" = destroyed ] && [ "$(j .environment.ReapedReason)" = "$2" ] || return 1
	api GET "/v1/events?subject=env:$1"
	[ "$(j '[.events[] | select(.Kind == "ttl.reaped") | .Body.reason] | first')" = "$2" ] || return 1
	[ "$(containers "$1")" -eq 0 ]
}
# wait_destroyed ENV SECONDS [EXEC_ENV]: poll until ENV is destroyed;
# meanwhile exec in and touch EXEC_ENV. 0 when destroyed in time.
wait_destroyed() {
	n=0
	while [ "$(status_of "$1")" != destroyed ]; do
		n=$((n + 1))
		[ $n -le $(($2 * 2)) ] || return 1
		if [ -n "${3:-}" ]; then
			exec_in "$3"
			"$top/bin/denv" env touch "$3" >/dev/null 2>&1
		fi
		sleep 0.5
	done
}

if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "1..0 # SKIP Docker or the fixture images are not usable here"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP needs root (volumes owned by uid 1000)"
	exit 0
fi
stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined"

# ---- bad values ----
api POST "/v1/envs/env_nope/touch"
[ "$code" = 404 ]
ok $? "touch of an unknown environment: 404"
api POST /v1/sandboxes '{"image":"denv-test/busybox:latest","idle_ttl_sec":-1}'
[ "$code" = 400 ] && [ "$(j .error)" = "idle_ttl_sec must be 0 (none) to 2592000, got -1" ]
ok $? "idle_ttl_sec -1: 400 naming the range"
api POST /v1/sandboxes '{"image":"denv-test/busybox:latest","max_ttl_sec":"1h"}'
[ "$code" = 400 ] && [ "$(j .error)" = "max_ttl_sec must be an integer" ]
ok $? "max_ttl_sec as a string: 400"
api POST /v1/sandboxes '{"image":"denv-test/busybox:latest","ttl_action":"stop"}'
[ "$code" = 400 ] && [ "$(j .error)" = 'ttl_action must be destroy or pause, got "stop"' ]
ok $? "ttl_action stop: 400 naming the two actions"

# ---- idle: one left alone is reaped, one kept busy stays ----
sandbox idle-a ',"idle_ttl_sec":3'
ok $? "sandbox with idle_ttl_sec 3 is healthy"
a=$id
[ "$(j .environment.IdleTTLSec)" = 3 ] && [ "$(j .idle_expires_at)" != null ] && [ "$(j .expires_at)" = null ]
ok $? "its answer has IdleTTLSec, idle_expires_at, and no expires_at (no max)"
sandbox idle-b ',"idle_ttl_sec":3'
b=$id
ok $? "a second one, to keep busy"
api PATCH "/v1/envs/$b" '{"max_ttl_sec":-3}'
[ "$code" = 400 ]
ok $? "PATCH with a bad value: 400"
wait_destroyed "$a" 60 "$b"
ok $? "the idle one is destroyed while the other is exec'd and touched"
reaped "$a" "ttl: idle 3 s exceeded"
ok $? "reaped for idleness: ReapedReason, a ttl.reaped event, no containers left"
[ "$(status_of "$b")" = running ] && [ "$(containers "$b")" -ge 1 ]
ok $? "the busy one is still running"
"$top/bin/denv" env touch "$b" >"$tmp/out" 2>&1
[ "$(j .environment.ID)" = "$b" ] && [ "$(j .idle_expires_at)" != null ]
ok $? "denv env touch answers the environment and its idle_expires_at"
wait_destroyed "$b" 60
ok $? "left alone, it goes too"
reaped "$b" "ttl: idle 3 s exceeded"
ok $? "  for the same reason"

# ---- max: reaped while busy ----
sandbox max-c ',"max_ttl_sec":6'
c=$id
ok $? "sandbox with max_ttl_sec 6"
[ "$(j .expires_at)" != null ] && [ "$(j .environment.IdleTTLSec)" = 3600 ]
ok $? "it has expires_at, and the server's default idle TTL (3600 s)"
n=0
while [ "$(status_of "$c")" != destroyed ] && [ $n -lt 120 ]; do
	exec_in "$c"
	n=$((n + 1))
	sleep 0.5
done
reaped "$c" "ttl: max 6 s reached"
ok $? "busy all along, it is reaped at its max TTL"

# ---- the Python client: the same fields, touch and set_ttl ----
PYTHONPATH="$top/python" "$top/python/.venv/bin/python" - >"$tmp/out" 2>&1 <<'EOF'
from denv import Client, DenvError
c = Client(timeout=60)
s = c.sandbox(image="denv-test/busybox:latest", cmd=["sleep", "3600"], name="py-f", idle_ttl_sec=600, max_ttl_sec=0)
assert s.raw["IdleTTLSec"] == 600 and s.raw["MaxTTLSec"] == 0, s.raw
t = c.touch(s.id)
assert t["idle_expires_at"] and t["expires_at"] is None, t
try:
    c.set_ttl(s.id, ttl_action="stop")
    raise SystemExit("stop accepted")
except DenvError as e:
    assert e.status == 400 and "destroy or pause" in str(e), e
u = c.set_ttl(s.id, max_ttl_sec=3)
assert u["environment"]["MaxTTLSec"] == 3 and u["expires_at"], u
print(s.id)
EOF
ok $? "Python: sandbox(idle_ttl_sec=...), touch, set_ttl, and a 400 for an unknown action"
f=$(tail -n 1 "$tmp/out")
wait_destroyed "$f" 60
ok $? "the max TTL set from Python reaps it"
reaped "$f" "ttl: max 3 s reached"
ok $? "  saying why"

# ---- forks: their own TTLs, else the source's ----
sandbox src-g ',"idle_ttl_sec":600,"max_ttl_sec":900'
g=$id
api POST "/v1/envs/$g/snapshot"
wait_dep "$(j .deployment.ID)"
ok $? "a sandbox with idle 600 s and max 900 s, snapshotted"
api POST "/v1/envs/$g/fork" '{"name":"fork-g1","idle_ttl_sec":-2}'
[ "$code" = 400 ]
ok $? "a fork with a bad idle_ttl_sec: 400"
api POST "/v1/envs/$g/fork" '{"name":"fork-g1"}'
g1=$(j .deployment.EnvID)
wait_dep "$(j .deployment.ID)" && api GET "/v1/envs/$g1" &&
	[ "$(j .environment.IdleTTLSec)/$(j .environment.MaxTTLSec)" = 600/900 ]
ok $? "a fork without TTLs inherits the source's (600/900)"
api POST "/v1/envs/$g/fork" '{"name":"fork-g2","idle_ttl_sec":3}'
g2=$(j .deployment.EnvID)
wait_dep "$(j .deployment.ID)" && api GET "/v1/envs/$g2" &&
	[ "$(j .environment.IdleTTLSec)/$(j .environment.MaxTTLSec)" = 3/900 ]
ok $? "a fork's own idle_ttl_sec wins, the max is inherited (3/900)"
wait_destroyed "$g2" 60 "$g1"
ok $? "the rollout fork left alone is reaped"
reaped "$g2" "ttl: idle 3 s exceeded"
ok $? "  saying why"
[ "$(status_of "$g")" = running ] && [ "$(status_of "$g1")" = running ]
ok $? "its source and its busy sibling are not"
api DELETE "/v1/envs/$g1" && api DELETE "/v1/envs/$g"

# ---- deploy: a project's environment takes TTLs too ----
api POST /v1/projects '{"name":"ttlp"}'
compose='services:
  main:
    image: denv-test/busybox:latest
    command: ["sleep", "3600"]
'
api POST /v1/projects/ttlp/deploy "$(jq -nc --arg c "$compose" '{compose: $c, env: "alpha", ttl_action: "stop"}')"
[ "$code" = 400 ]
ok $? "a deploy with ttl_action stop: 400"
api POST /v1/projects/ttlp/deploy "$(jq -nc --arg c "$compose" '{compose: $c, env: "alpha", idle_ttl_sec: 3}')"
p_env=$(j .deployment.EnvID)
wait_dep "$(j .deployment.ID)" && api GET "/v1/envs/$p_env" && [ "$(j .environment.IdleTTLSec)" = 3 ]
ok $? "a deploy with idle_ttl_sec 3 sets it on the environment"
wait_destroyed "$p_env" 60
ok $? "  which is reaped once idle"
reaped "$p_env" "ttl: idle 3 s exceeded"
ok $? "  saying why"

# ---- restart: the TTLs and clocks are in the store ----
sandbox keep-d ',"max_ttl_sec":25,"idle_ttl_sec":0'
d=$id
d_expires=$(j .expires_at)
ok $? "sandbox with max_ttl_sec 25 and no idle TTL"
sandbox patch-e ''
e=$id
"$top/bin/denv" env ttl "$e" --idle -1 >"$tmp/out" 2>&1
[ $? -ne 0 ] && grep -q "number of seconds" "$tmp/out"
ok $? "denv env ttl --idle -1 is refused"
"$top/bin/denv" env ttl "$e" --idle 4 >"$tmp/out" 2>&1
[ "$(j .environment.IdleTTLSec)" = 4 ] && [ "$(j .idle_expires_at)" != null ]
ok $? "denv env ttl --idle 4 (PATCH) sets it and shows idle_expires_at"
port=${DENV_SERVER##*:}
kill "$stack_cp_pid" && wait "$stack_cp_pid" 2>/dev/null
"$top/bin/denv-cp" -sandbox-idle-ttl soon -db "$tmp/other" >"$tmp/out" 2>&1
[ $? = 2 ] && grep -q -- "-sandbox-idle-ttl: want seconds or a duration" "$tmp/out"
ok $? "-sandbox-idle-ttl soon: refused at start"
"$top/bin/denv-cp" -addr "127.0.0.1:$port" -db "$tmp/store" -sandbox-max-ttl 45m >>"$tmp/cp.log" 2>&1 &
stack_cp_pid=$!
n=0
until curl -s "$DENV_SERVER/health" | grep -q ok || [ $n -ge 100 ]; do n=$((n + 1)); sleep 0.1; done
api GET "/v1/envs/$d"
[ "$code" = 200 ] && [ "$(j .expires_at)" = "$d_expires" ] && [ "$(j .environment.MaxTTLSec)" = 25 ] &&
	[ "$(j .idle_expires_at)" = null ]
ok $? "after a restart: the same expires_at, MaxTTLSec, no idle TTL"
api GET "/v1/envs/$e"
[ "$(j .environment.IdleTTLSec)" = 4 ] && [ "$(j .environment.Status)" = running ]
ok $? "  and the PATCHed idle TTL is kept"
n=0
until "$top/bin/denv" host list 2>/dev/null | grep -q '"connected": true' || [ $n -ge 150 ]; do n=$((n + 1)); sleep 0.2; done
sandbox flags-h ''
[ "$(j .environment.MaxTTLSec)/$(j .environment.IdleTTLSec)" = 2700/3600 ]
ok $? "a sandbox after restarting with -sandbox-max-ttl 45m gets max 2700 s, idle 3600 s"
wait_destroyed "$e" 90
ok $? "the restarted server reaps the idle one"
reaped "$e" "ttl: idle 4 s exceeded"
ok $? "  saying why"
wait_destroyed "$d" 90
ok $? "and the one at its max TTL"
reaped "$d" "ttl: max 25 s reached"
ok $? "  saying why"

suite_done
