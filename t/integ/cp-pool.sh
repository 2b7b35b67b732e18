#!/bin/sh
# cp-pool.sh: warm sandbox pools (denv-cp -sandbox-pool, denv-cp(8) "WARM
# POOLS") on a real denv-cp and denvd on real Docker:
#   - the pool fills to its size in the background (GET /v1/pools);
#   - a create with the pool's spec takes a pooled sandbox: one of the
#     pooled environment ids, with the caller's name, project and TTLs,
#     answered in the shape a fresh create has, without the pool's marks;
#   - the pool refills, and the claimed sandbox never comes back to it;
#   - freshness: after a claimed sandbox is used and destroyed, the next
#     claim is another environment, with another container and network and
#     none of the first one's files;
#   - a create the pool cannot serve exactly (other egress, a taken name)
#     is created fresh or refused, and leaves the pool's sandboxes alone;
#   - x-denv.pool: a deployed version keeps warm forks that from_version
#     sandboxes claim; a newer version's pool retires the older one's;
#   - denv top's title shows the pool; denv-cp refuses a bad -sandbox-pool.
# Every wait polls with a deadline; nothing asserts on wall time.
suite=cp-pool
. "$(dirname "$0")/../lib/stack-tap.sh"
suite_need_stack busybox

# egress allow: each sandbox has a network of its own (a denied one-service
# sandbox has none to share).
body='{"image":"denv-test/busybox:latest","cmd":["sleep","3600"],"egress":"allow"}'
DENV_SANDBOX_POOL='{"image":"denv-test/busybox:latest","cmd":["sleep","3600"],"egress":"allow","size":2}'
export DENV_SANDBOX_POOL
if ! stack_start; then
	echo "Bail out! stack did not start"
	exit 1
fi

api() {
	code=$(curl -s -o "$tmp/doc" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $DENV_API_KEY" \
		-H 'Content-Type: application/json' ${3:+--data "$3"} "$DENV_SERVER$2")
	cp "$tmp/doc" "$tmp/out"
}
# pool FIELD: that figure of the only pool.
pool() { api GET /v1/pools && py "d['pools'][0]['$1']"; }
pool_full() { [ "$(pool ready)" = 2 ]; }
# pooled: the ids of the environments waiting in the pool, one a line.
pooled() {
	api GET /v1/projects/denv-pool/envs >/dev/null
	py "'\n'.join(e['ID'] for e in (d.get('environments') or d.get('envs') or []) if e['Status'] == 'running')"
}
in_pool() { pooled | grep -qx "$1"; }
net_of() { docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "$1"; }
ctr_of() { docker ps -q --filter "label=ai.denv.env=$1" | head -n 1; }

until_ok 120 pool_full
ok $? "the pool fills to its size in the background"
pooled >"$tmp/pool0"
[ "$(wc -l <"$tmp/pool0")" = 2 ] && [ "$(pool size)" = 2 ] && [ "$(pool image)" = denv-test/busybox:latest ]
ok $? "GET /v1/pools: size 2, both pooled sandboxes running"

api POST /v1/sandboxes "${body%\}},\"name\":\"first\",\"idle_ttl_sec\":900}"
a=$(py "d['environment']['ID']")
[ "$code" = 201 ] && grep -qx "$a" "$tmp/pool0"
ok $? "a create with the pool's spec takes a pooled sandbox"
[ "$(py "d['environment']['Name']")" = first ] && [ "$(py "d['environment']['IdleTTLSec']")" = 900 ] &&
	[ "$(py "d['idle_expires_at'] is not None and d['deployment']['Status']")" = succeeded ]
ok $? "it has the caller's name and idle TTL, and its deployment succeeded"
py "sorted(d['environment'])" >"$tmp/keys_claimed"
[ "$(py "'Pool' in d['environment'] or 'Sandbox' in d['environment']")" = False ]
ok $? "the answer carries no pool bookkeeping"
api GET "/v1/envs/$a"
pid=$(py "d['environment']['ProjectID']")
api GET /v1/projects
[ "$(py "[p['ID'] for p in d['projects'] if p['Name'] == 'sandboxes'][0]")" = "$pid" ]
api GET "/v1/envs/$a/deployments"
[ "$(py "set(x['ProjectID'] for x in d['deployments'])")" = "{'$pid'}" ]
ok $? "it moved to the caller's project (sandboxes), its deployment too"

api POST /v1/sandboxes '{"image":"denv-test/busybox:latest","cmd":["sleep","3600"]}'
f=$(py "d['environment']['ID']")
[ "$code" = 201 ] && ! grep -qx "$f" "$tmp/pool0"
ok $? "a create with another egress (deny) is created fresh"
py "sorted(d['environment'])" >"$tmp/keys_fresh"
cmp -s "$tmp/keys_claimed" "$tmp/keys_fresh"
ok $? "a claimed and a fresh sandbox answer with the same fields"

until_ok 120 pool_full
ok $? "the pool refills to its size"
! in_pool "$a"
ok $? "the claimed sandbox is not in the pool"

api POST "/v1/envs/$a/exec" '{"service":"main","cmd":["sh","-c","echo used >/work/marker; echo ok"]}'
[ "$code" = 200 ] && [ "$(py "d['stdout'].strip()")" = ok ]
ok $? "the claimed sandbox runs a command and keeps a file"
ca=$(ctr_of "$a")
na=$(net_of "$ca")
[ -n "$ca" ] && [ -n "$na" ] && [ "$na" != none ]
ok $? "its container and network: $na"

api DELETE "/v1/envs/$a"
[ "$code" = 202 ] && stack_wait_destroyed "$a"
ok $? "destroying it"
! in_pool "$a" && [ "$(pool claims)" = 1 ]
ok $? "a destroyed sandbox is not returned to the pool"

pooled >"$tmp/pool1"
api POST /v1/sandboxes "${body%\}},\"name\":\"second\"}"
b=$(py "d['environment']['ID']")
[ "$code" = 201 ] && grep -qx "$b" "$tmp/pool1" && [ "$b" != "$a" ]
ok $? "the next claim is another pooled environment"
cb=$(ctr_of "$b")
[ -n "$cb" ] && [ "$cb" != "$ca" ] && [ "$(net_of "$cb")" != "$na" ]
ok $? "with another container ($cb, was $ca) and another network ($(net_of "$cb"), was $na)"
api POST "/v1/envs/$b/exec" '{"service":"main","cmd":["sh","-c","test -e /work/marker && echo stale || echo clean"]}'
[ "$(py "d['stdout'].strip()")" = clean ]
ok $? "and none of the previous claim's files"

until_ok 120 pool_full
ready=$(pool ready)
api POST /v1/sandboxes "${body%\}},\"name\":\"second\"}"
[ "$code" = 409 ] && [ "$(pool ready)" = "$ready" ] && [ "$(pool claims)" = 2 ]
ok $? "a taken name is refused and consumes no pooled sandbox"

api GET /v1/pools
[ "$(py "d['pools'][0]['fills'] >= 4 and d['pools'][0]['failures'] == 0")" = True ]
ok $? "the pool counted its fills (4 or more) and no failures"

# ---- x-denv.pool: warm forks of a version ----
cat >"$tmp/compose.yaml" <<'YAML'
services:
  main:
    image: denv-test/busybox:latest
    command: ["sleep", "3600"]
    volumes: ["work:/work"]
volumes:
  work: {}
x-denv:
  pool: 2
YAML
run project create vp
run deploy --project vp -f "$tmp/compose.yaml"
dep1=$(dep_of_out)
api GET "/v1/deployments/$dep1"
v1=$(py "d['deployment']['VersionID']")
src=$(py "d['deployment']['EnvID']")
[ "$(py "d['deployment']['Status']")" = succeeded ] && [ -n "$v1" ]
ok $? "a compose with x-denv.pool: 2 deploys"
vpool() { api GET /v1/pools >/dev/null && py "[p['$2'] for p in d['pools'] if p['version'] == '$1'][0]" 2>/dev/null; }
vpool_full() { [ "$(vpool "$1" ready)" = 2 ]; }
until_ok 120 vpool_full "$v1"
ok $? "its version gets a pool of 2 warm forks"
api GET /v1/projects/vp/envs
py "'\n'.join(e['ID'] for e in d['environments'] if e['ID'] != '$src' and e['Status'] == 'running')" >"$tmp/vpool0"
[ "$(wc -l <"$tmp/vpool0")" = 2 ]
ok $? "the forks wait in the version's project"
api POST /v1/sandboxes "{\"from_version\":\"$v1\",\"name\":\"vf\"}"
vf=$(py "d['environment']['ID']")
[ "$code" = 201 ] && grep -qx "$vf" "$tmp/vpool0" && [ "$(py "d['environment']['Name']")" = vf ] &&
	[ "$(py "d['deployment']['Kind']")" = fork ]
ok $? "a from_version sandbox takes one of them, with its name"
[ "$(vpool "$v1" claims)" = 1 ]
ok $? "the version pool counted the claim"
run deploy --project vp -f "$tmp/compose.yaml"
dep2=$(dep_of_out)
api GET "/v1/deployments/$dep2"
v2=$(py "d['deployment']['VersionID']")
until_ok 120 vpool_full "$v2"
ok $? "a new version gets its own pool"
[ -z "$(vpool "$v1" ready)" ]
ok $? "and the older version's pool is retired"
left=$(grep -vx "$vf" "$tmp/vpool0")
stack_wait_destroyed "$left"
ok $? "its waiting fork is destroyed"

run top --once
[ "$rc" = 0 ] && head -n 1 "$tmp/out" | grep -q "pools: ver_[0-9A-Z]* 2/2 ready 0 claimed, denv-te"
ok $? "denv top shows the pools in its title (cut at 120 columns)"

"$top/bin/denv-cp" -addr 127.0.0.1:0 -db "$tmp/bad" -sandbox-pool '{"image":"denv-test/busybox:latest","size":0}' \
	>"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -qF -- "-sandbox-pool: size must be 1 to 256" "$tmp/err"
ok $? "denv-cp refuses a pool of size 0"
"$top/bin/denv-cp" -addr 127.0.0.1:0 -db "$tmp/bad" -sandbox-pool '{"image":"x","size":1,"name":"a"}' \
	>"$tmp/out" 2>"$tmp/err"
[ $? = 1 ] && grep -qF "belong to the claim" "$tmp/err"
ok $? "and a pool that names its sandboxes"

suite_done
