#!/bin/sh
# cp-batch.sh: POST /v1/sandboxes/batch and GET /v1/batches/{id} against a
# real denv-cp and two joined denvd hosts on real Docker (denv-cp(8),
# "BATCHES"):
#   - bad count, form and name_prefix values are 400s; a taken name is 409;
#   - a 20-member image batch answers 202 at once with every member pending,
#     then every member becomes healthy, named <prefix><i>, each one runs a
#     command, and the members are spread over both hosts;
#   - a batch whose image is missing reports failed per member, with the
#     host's error; a destroyed member is reported destroyed, the rest stay
#     healthy;
#   - a batch of forks of one version: each fork has the version's data;
#   - over the sandbox quota: 429 naming the limit and the count asked;
#   - a replay with the same Idempotency-Key gets the same batch and members.
# Every wait polls with a deadline; nothing asserts on wall time.
# Prints TAP; removes its containers, networks and data even on failure.
suite=cp-batch
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
sc2_pid=
# The second host: stack_stop knows only the first's data dir.
suite_cleanup() {
	[ -n "$sc2_pid" ] && kill "$sc2_pid" 2>/dev/null && wait "$sc2_pid" 2>/dev/null
	suite_rm_envs "$tmp/data2"
}
j() { jq -r "$1" "$tmp/out"; }
# wait_done BATCH: poll until no member is pending (180 s); the view in $tmp/out.
wait_done() {
	n=0
	while :; do
		api GET "/v1/batches/$1"
		[ "$code" = 200 ] && [ "$(j .done)" = true ] && return 0
		n=$((n + 1)); [ $n -lt 360 ] || return 1; sleep 0.5
	done
}
busybox='"image":"denv-test/busybox:latest","cmd":["sleep","3600"]'

echo "1..30"
if ! stack_start; then
	echo "Bail out! stack did not start"
	exit 1
fi
# A second host, so that spread has a choice.
token=$("$top/bin/denv" host join-token | jq -r .token)
"$top/bin/denvd" join --server "$DENV_SERVER" --token "$token" --state "$tmp/host2.json" \
	--data "$tmp/data2" --probe-url http://192.0.2.1/ >"$tmp/denvd2.log" 2>&1 &
sc2_pid=$!
n=0
until [ "$("$top/bin/denv" host list 2>/dev/null | grep -c '"connected": true')" -ge 2 ]; do
	n=$((n + 1)); [ $n -lt 100 ] || break; sleep 0.2
done
api GET /v1/hosts
[ "$(j '[.hosts[] | select(.connected)] | length')" = 2 ]
ok $? "two hosts connected"

# ---- refusals ----
api POST /v1/sandboxes/batch "{$busybox,\"count\":0}"
[ "$code" = 400 ] && j .error | grep -q 'count must be 1 to 256'
ok $? "count 0: 400"
api POST /v1/sandboxes/batch "{$busybox,\"count\":257}"
[ "$code" = 400 ]
ok $? "count 257: 400"
api POST /v1/sandboxes/batch '{"count":2}'
[ "$code" = 400 ] && j .error | grep -q 'one of image or from_version'
ok $? "neither image nor from_version: 400"
api POST /v1/sandboxes/batch "{$busybox,\"count\":2,\"name_prefix\":\"-bad\"}"
[ "$code" = 400 ] && j .error | grep -q 'name_prefix'
ok $? "an invalid name_prefix: 400"

# ---- 20 members from one image ----
api POST /v1/sandboxes/batch "{$busybox,\"count\":20,\"name_prefix\":\"roll-\"}"
b=$(j '.batch.ID // empty')
[ "$code" = 202 ] && [ -n "$b" ] && [ "$(j '.members | length')" = 20 ] &&
	[ "$(j '[.members[] | select(.state == "pending")] | length')" = 20 ]
ok $? "a 20-member batch: 202 with 20 pending members"
[ "$(j '.members[0].name')" = roll-0 ] && [ "$(j '.members[19].name')" = roll-19 ] &&
	[ "$(j '[.members[].environment] | unique | length')" = 20 ]
ok $? "members are named from the prefix, each its own environment"
api POST /v1/sandboxes/batch "{$busybox,\"count\":2,\"name_prefix\":\"roll-1\"}"
[ "$code" = 409 ] && j .error | grep -q 'roll-10'
ok $? "a batch whose names are taken: 409 naming the first (roll-10)"
wait_done "$b"
ok $? "the batch finishes"
[ "$(j .counts.healthy)" = 20 ] && [ "$(j '[.members[] | select(.state == "healthy")] | length')" = 20 ]
ok $? "all 20 members healthy"
first=$(j '.members[0].environment')
last=$(j '.members[19].environment')
hosts=""
for e in $(j '.members[].environment'); do
	hosts="$hosts $(curl -s -H "Authorization: Bearer $DENV_API_KEY" "$DENV_SERVER/v1/envs/$e" | jq -r .environment.HostID)"
done
[ "$(echo "$hosts" | tr ' ' '\n' | grep -v '^$' | sort -u | wc -l)" = 2 ]
ok $? "the members are spread over both hosts"
api POST "/v1/envs/$first/exec" '{"service":"main","cmd":["echo","first"]}'
[ "$code" = 200 ] && [ "$(j .stdout)" = first ]
ok $? "the first member runs a command"
api POST "/v1/envs/$last/exec" '{"service":"main","cmd":["echo","last"]}'
[ "$code" = 200 ] && [ "$(j .stdout)" = last ]
ok $? "the last member runs a command"

# ---- per-member outcomes ----
api DELETE "/v1/envs/$last"
stack_wait_destroyed "$last"
api GET "/v1/batches/$b"
[ "$(j '.members[19].state')" = destroyed ] && [ "$(j .counts.healthy)" = 19 ]
ok $? "a destroyed member is reported destroyed, the other 19 stay healthy"
api POST /v1/sandboxes/batch '{"image":"denv-test/no-such-image:latest","count":3,"name_prefix":"gone-"}'
g=$(j '.batch.ID // empty')
wait_done "$g"
[ "$(j .counts.failed)" = 3 ] && [ "$(j '[.members[] | select(.error | test("no-such-image"))] | length')" = 3 ]
ok $? "a missing image: each member failed with the host's error"

# ---- forks of one version ----
api POST "/v1/envs/$first/exec" '{"service":"main","cmd":["sh","-c","echo seed > /work/seed"]}'
api POST "/v1/envs/$first/snapshot"
dep=$(j .deployment.ID)
n=0
until api GET "/v1/deployments/$dep" && [ "$(j .deployment.Status)" = succeeded ]; do
	n=$((n + 1)); [ $n -lt 120 ] || break; sleep 0.5
done
api GET "/v1/envs/$first"
v=$(j .environment.CurrentVersionID)
api POST /v1/sandboxes/batch "{\"from_version\":\"$v\",\"count\":5,\"name_prefix\":\"fk-\"}"
f=$(j '.batch.ID // empty')
[ "$code" = 202 ] && [ "$(j '.members | length')" = 5 ]
ok $? "a batch of 5 forks of one version: 202"
wait_done "$f"
[ "$(j .counts.healthy)" = 5 ]
ok $? "all 5 forks healthy"
seeds=0
for e in $(j '.members[].environment'); do
	s=$(curl -s -X POST -H "Authorization: Bearer $DENV_API_KEY" -H 'Content-Type: application/json' \
		--data '{"service":"main","cmd":["cat","/work/seed"]}' "$DENV_SERVER/v1/envs/$e/exec" | jq -r .stdout)
	[ "$s" = seed ] && seeds=$((seeds + 1))
done
[ "$seeds" = 5 ]
ok $? "each fork has the version's data"

# ---- quota and idempotency ----
team=$(curl -s -H "Authorization: Bearer $DENV_API_KEY" "$DENV_SERVER/v1/me" | jq -r '.team.ID // .TeamID // empty')
api PUT "/v1/teams/$team/quotas" '{"max_sandboxes":30}'
api POST /v1/sandboxes/batch "{$busybox,\"count\":10,\"name_prefix\":\"q-\"}"
[ "$code" = 429 ] && j .error | grep -q 'quota exceeded: .*sandboxes' && j .error | grep -q '10 more asked'
ok $? "over the sandbox quota: 429 naming the limit and the count asked"
api PUT "/v1/teams/$team/quotas" '{"max_sandboxes":null}'
api POST /v1/sandboxes/batch "{$busybox,\"count\":2,\"name_prefix\":\"idem-\"}" "Idempotency-Key: batch-k1"
one=$(j .batch.ID)
m1=$(j '[.members[].environment] | join(",")')
[ "$code" = 202 ]
ok $? "a batch with an Idempotency-Key: 202"
api POST /v1/sandboxes/batch "{$busybox,\"count\":2,\"name_prefix\":\"idem-\"}" "Idempotency-Key: batch-k1"
[ "$code" = 202 ] && [ "$(j .batch.ID)" = "$one" ] && [ "$(j '[.members[].environment] | join(",")')" = "$m1" ]
ok $? "its replay gets the same batch and members"
# ---- wait_sec: held until a member's deployment ends ----
api POST /v1/sandboxes/batch "{$busybox,\"count\":2,\"name_prefix\":\"w-\"}"
w=$(j .batch.ID)
api GET "/v1/batches/$w?wait_sec=61"
[ "$code" = 400 ] && [ "$(j .error)" = "wait_sec must be 0 to 60" ]
ok $? "wait_sec over 60: 400"
api GET "/v1/batches/$w?wait_sec=60"
[ "$code" = 200 ] && [ "$(j '[.members[] | select(.state != "pending")] | length')" -ge 1 ]
ok $? "wait_sec: the answer comes with a member no longer pending"
wait_done "$w"
api GET "/v1/batches/$w?wait_sec=60"
[ "$code" = 200 ] && [ "$(j .done)" = true ] && [ "$(j .counts.healthy)" = 2 ]
ok $? "wait_sec on a finished batch answers at once"

# ---- the CLI ----
denv batch create --image denv-test/busybox:latest -n 3 --name-prefix cli- -- sleep 3600 >"$tmp/out" 2>&1
rc=$?
[ $rc = 0 ] && grep -q '^cli-2 env_[^ ]* healthy$' "$tmp/out" && grep -q '^batch bat_[^ ]*: 3 of 3 healthy$' "$tmp/out"
ok $? "denv batch create --wait: a line per member as it becomes healthy, then the count"
cb=$(sed -n 's/^batch \(bat_[^:]*\):.*/\1/p' "$tmp/out")
denv batch get "$cb" >"$tmp/out" 2>&1 && [ "$(j '.counts.healthy')" = 3 ]
ok $? "denv batch get prints the batch"
denv batch create --image denv-test/busybox:latest >"$tmp/out" 2>&1
[ $? = 2 ] && grep -q -- '--count' "$tmp/out"
ok $? "denv batch create without --count: a usage error"
# ---- Python: AsyncClient and Client on the real stack ----
cat >"$tmp/async.py" <<'PY'
import asyncio, sys
from denv import AsyncClient, Client

async def main():
    async with AsyncClient(timeout=120) as ac:
        ac.poll_interval = 0.1
        seen = []
        b = await ac.batch(3, image="denv-test/busybox:latest", cmd=["sleep", "3600"], name_prefix="py-",
                           on_change=lambda m: seen.append(m.state))
        assert [m.state for m in b.members] == ["healthy"] * 3, b
        assert seen.count("healthy") == 3, seen
        outs = await asyncio.gather(*(ac.exec(m.id, "main", ["sh", "-c", "printf '%s\\0x' " + m.name])
                                      for m in b.members))
        assert [o.stdout for o in outs] == [m.name + "\0x" for m in b.members], outs
        met = await ac.metrics(b.members[0].id)
        assert met["services"][0]["status"] == "running", met
        await asyncio.gather(*(ac.destroy(m.id) for m in b.members))
    with Client() as c:
        b = c.batch(2, image="denv-test/busybox:latest", cmd=["sleep", "3600"], name_prefix="pys-")
        assert len(b.healthy) == 2, b
        for m in b.members:
            c.destroy(m.id)
    print("python ok")

asyncio.run(main())
PY
PYTHONPATH="$top/python" "$top/python/.venv/bin/python" "$tmp/async.py" >"$tmp/out" 2>&1
ok $? "AsyncClient: a batch of 3, three execs at once (NUL intact), metrics, destroys at once"
grep -q 'python ok' "$tmp/out"
ok $? "Client: a batch of 2 and its destroys"
api GET "/v1/batches/bat_nosuch"
[ "$code" = 404 ]
ok $? "an unknown batch: 404"
wait_done "$one" >/dev/null
[ "$failed" = 0 ]
