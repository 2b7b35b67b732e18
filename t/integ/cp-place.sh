#!/bin/sh
# cp-place.sh: placement across many hosts (denv-cp(8), "PLACEMENT") with a
# real denv-cp and three real denvd processes on this machine, each with its
# own data dir and state file, on real Docker:
#   - spread puts three environments on three distinct hosts, and the place
#     phase's evidence names the policy and each host's free capacity;
#   - pack puts two more on one host;
#   - a deploy no host has room for is refused, naming what it needed;
#   - a bad placement value is a 400; the team's policy is read and set;
#   - drained hosts get nothing new (and say so); undrain lets them back;
#   - killing one denvd makes its host and its environments lost (with
#     host.lost and env.lost events, DENV_HOST_LOST_SEC=3), and a redeploy of
#     a lost environment's version lands on another host and runs; the lost
#     host comes back and a rollback of that environment to the version
#     deployed there moves the snapshot from it (restore evidence: moved).
# Every wait polls with a deadline; nothing asserts on wall time.
# Prints TAP; removes its containers, networks and data even on failure.
suite=cp-place
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
suite_need_stack busybox
sc2_pid=
sc3_pid=
# The second and third hosts: stack_stop knows only the first's data dir.
suite_cleanup() {
	for p in $sc2_pid $sc3_pid ${back_pid:-}; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	suite_rm_envs "$tmp/data2" "$tmp/data3"
}
j() { jq -r "$1" "$tmp/out"; }
# compose CPUS: a busybox service capped at CPUS and 64 MB, as JSON text.
compose() {
	printf 'services:\n  box:\n    image: denv-test/busybox:latest\n    command: ["sleep", "3600"]\n    cpus: %s\n    mem_limit: 64m\n' "$1" |
		jq -Rs .
}
# deploy ENV CPUS [PLACEMENT]: POST a deploy; its id in $dep, the env's in $env.
deploy() {
	api POST /v1/projects/place/deploy "{\"env\":\"$1\",\"compose\":$(compose "$2")${3:+,\"placement\":\"$3\"}}"
	dep=$(j '.deployment.ID // empty')
	env=$(j '.deployment.EnvID // empty')
}
host_of() { api GET "/v1/envs/$1" && j .environment.HostID; }
status_of() { api GET "/v1/envs/$1" && j .environment.Status; }
# place_ev DEP: the place phase's evidence into $tmp/out.
place_ev() {
	api GET "/v1/deployments/$1"
	jq '.phases[] | select(.Name == "place") | .Evidence' "$tmp/out" >"$tmp/ev" && mv "$tmp/ev" "$tmp/out"
}
join_host() {
	token=$("$top/bin/denv" host join-token | jq -r .token)
	"$top/bin/denvd" join --server "$DENV_SERVER" --token "$token" --state "$tmp/host$1.json" \
		--data "$tmp/data$1" --probe-url http://192.0.2.1/ >"$tmp/denvd$1.log" 2>&1 &
}

DENV_HOST_LOST_SEC=3
export DENV_HOST_LOST_SEC
if ! stack_start; then
	echo "Bail out! stack did not start"
	exit 1
fi
join_host 2
sc2_pid=$!
join_host 3
sc3_pid=$!
connected() { [ "$("$top/bin/denv" host list 2>/dev/null | grep -c '"connected": true')" -ge 3 ]; }
until_ok 60 connected
ok $? "three hosts connected"
h1=$(jq -r .host_id "$tmp/host.json")
h2=$(jq -r .host_id "$tmp/host2.json")
h3=$(jq -r .host_id "$tmp/host3.json")
api POST /v1/projects '{"name":"place"}'
[ "$code" = 201 ]
ok $? "project created"

# ---- refusals and the team's policy ----
api POST /v1/projects/place/deploy "{\"env\":\"bad\",\"compose\":$(compose 0.5),\"placement\":\"fill\"}"
[ "$code" = 400 ] && j .error | grep -q 'placement must be spread or pack'
ok $? "placement \"fill\": 400"
team=$("$top/bin/denv" whoami | jq -r 'if (.team|type) == "object" then .team.ID else .team end')
api GET "/v1/teams/$team/placement"
[ "$code" = 200 ] && [ "$(j .placement)" = spread ]
ok $? "the team's policy defaults to spread"
api PUT "/v1/teams/$team/placement" '{"placement":"pack"}'
[ "$code" = 200 ] && [ "$(j .placement)" = pack ]
ok $? "the team's policy set to pack"
api PUT "/v1/teams/$team/placement" '{"placement":"spread"}'

# ---- spread: three hosts ----
deploy s1 0.5 spread; d1=$dep; s1=$env
deploy s2 0.5 spread; d2=$dep; s2=$env
deploy s3 0.5 spread; d3=$dep; s3=$env
wait_dep "$d1" && wait_dep "$d2" && wait_dep "$d3"
ok $? "three spread deploys succeed"
for e in "$s1" "$s2" "$s3"; do host_of "$e"; done >"$tmp/hosts"
[ "$(sort -u "$tmp/hosts" | grep -c host_)" = 3 ]
ok $? "spread: on three distinct hosts" "$tmp/hosts"
place_ev "$d3"
[ "$(j .policy)" = spread ] && [ "$(j '.hosts | length')" = 3 ] && [ "$(j .need.millicpus)" = 500 ] &&
	[ "$(j .need.memory_mb)" = 64 ] && [ "$(j '[.hosts[] | .free.millicpus] | min')" -ge 0 ]
ok $? "spread: the evidence names the policy, the need and each host's free capacity"

# ---- pack: one host ----
deploy p1 0.25 pack; p1d=$dep; p1=$env
wait_dep "$p1d"
ok $? "a packed deploy succeeds"
deploy p2 0.25 pack; p2d=$dep; p2=$env
wait_dep "$p2d"
ok $? "a second packed deploy succeeds"
[ "$(host_of "$p1")" = "$(host_of "$p2")" ]
ok $? "pack: both on the same host"
place_ev "$p2d"
[ "$(j .policy)" = pack ] && j .reason | grep -q 'smallest free share'
ok $? "pack: the evidence says why"

# ---- no room ----
deploy big 64
wait_dep "$dep"
[ $? = 1 ] && api GET "/v1/deployments/$dep" && j .deployment.Error | grep -q 'no connected host has room'
ok $? "64 CPUs: refused, no host has room"

# ---- drain ----
api POST "/v1/hosts/$h1/drain"
[ "$code" = 200 ] && [ "$(j .host.Draining)" = true ]
ok $? "drain: 200, the host says it is draining"
api POST "/v1/hosts/$h2/drain"
"$top/bin/denv" host list >"$tmp/out"
[ "$(jq "[.hosts[] | select(.Draining == true)] | length" "$tmp/out")" = 2 ]
ok $? "host list shows both drained hosts"
deploy dr1 0.25 pack; drd=$dep; dr1=$env
wait_dep "$drd" && [ "$(host_of "$dr1")" = "$h3" ]
ok $? "with two hosts drained, a new environment goes to the third"
api POST "/v1/hosts/$h3/drain"
deploy dr2 0.25
wait_dep "$dep"
[ $? = 1 ] && api GET "/v1/deployments/$dep" && j .deployment.Error | grep -q 'no connected host'
ok $? "every host drained: refused"
[ "$(status_of "$s1")" = running ]
ok $? "a drained host keeps its environments"
"$top/bin/denv" host undrain "$h1" >"$tmp/out" 2>"$tmp/err" && [ "$(j .host.Draining)" = false ]
ok $? "denv host undrain"
"$top/bin/denv" host undrain "$h2" >/dev/null 2>&1
"$top/bin/denv" host undrain "$h3" >/dev/null 2>&1
api POST /v1/hosts/host_nonesuch/drain
[ "$code" = 404 ]
ok $? "drain of an unknown host: 404"

# ---- a lost host ----
lost=$(host_of "$s3")
api GET "/v1/envs/$s3"
ver=$(j .environment.CurrentVersionID)
case $lost in
"$h1") victim=$stack_sc_pid; stack_sc_pid= lost_n= ;;
"$h2") victim=$sc2_pid; sc2_pid= lost_n=2 ;;
*) victim=$sc3_pid; sc3_pid= lost_n=3 ;;
esac
kill -9 "$victim"
wait "$victim" 2>/dev/null
# The three hosts share this machine's Docker: a machine that is really gone
# takes its containers with it, so take the lost host's away too (else the
# re-created environment's container names would clash with them here).
suite_rm_env "$s3"
is_lost() { [ "$(status_of "$s3")" = lost ]; }
until_ok 90 is_lost
ok $? "killing the host's denvd: its environment becomes lost"
api GET /v1/hosts
[ "$(jq -r --arg h "$lost" '.hosts[] | select(.ID == $h) | .Status' "$tmp/out")" = lost ]
ok $? "the host's state is lost"
api GET "/v1/events?subject=env:$s3"
[ "$(j '[.events[] | select(.Kind == "env.lost" and .Body.host == "'"$lost"'")] | length')" = 1 ]
ok $? "an env.lost event names the host"
api GET "/v1/events?subject=host:$lost"
j '.events[] | select(.Kind == "host.lost") | .Body.environments[]' | grep -q "$s3"
ok $? "a host.lost event lists its environments"
"$top/bin/denv" redeploy "$s3" >"$tmp/out" 2>"$tmp/err"
[ "$(status_of "$s3")" = running ] && moved=$(host_of "$s3") && [ "$moved" != "$lost" ] &&
	[ -n "$moved" ]
ok $? "denv redeploy: the lost environment runs again, on another host"
[ "$(exec_out "$s3" box echo back)" = back ]
ok $? "  and runs commands there"

# ---- a rollback whose version lives on another host ----
# The lost host comes back (its state and data dir as they were); the
# environment, now elsewhere, rolls back to the version deployed there: the
# restore moves that snapshot from the host that came back.
"$top/bin/denvd" run --server "$DENV_SERVER" --state "$tmp/host$lost_n.json" --data "$tmp/data$lost_n" \
	--probe-url http://192.0.2.1/ >"$tmp/denvd-back.log" 2>&1 &
back_pid=$!
is_back() { api GET /v1/hosts && [ "$(jq -r --arg h "$lost" '.hosts[] | select(.ID == $h) | .connected' "$tmp/out")" = true ]; }
until_ok 60 is_back
ok $? "the lost host comes back" "$tmp/denvd-back.log"
api POST "/v1/envs/$s3/rollback" "{\"version\":\"$ver\"}"
rb=$(j '.deployment.ID // empty')
wait_dep "$rb"
ok $? "a rollback to the version deployed on that host succeeds on $moved" "$tmp/out"
api GET "/v1/deployments/$rb"
jq '.phases[] | select(.Name == "restore") | .Evidence.moved' "$tmp/out" >"$tmp/moved"
# (The box has no volumes: what moves is the snapshot's record, 0 bytes.)
[ "$(jq -r .from_host "$tmp/moved")" = "$lost" ] && [ "$(jq -r .to_host "$tmp/moved")" = "$moved" ]
ok $? "  its restore moved the snapshot from the host that came back" "$tmp/moved"
[ "$(status_of "$s3")" = running ] && [ "$(host_of "$s3")" = "$moved" ] && [ "$(exec_out "$s3" box echo rolled)" = rolled ]
ok $? "  and the environment runs there at that version"
kill "$back_pid" 2>/dev/null && wait "$back_pid" 2>/dev/null
suite_done
