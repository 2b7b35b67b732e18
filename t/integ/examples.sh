#!/bin/sh
# examples.sh: every world under examples/ deploys on this machine's own
# images and grades as its comments say. A control plane on a temporary
# store and a sidecar joined to it (t/lib/stack.sh), then for each example:
# deploy --wait, the environment running on a healthy version, what warm
# seeded, the verifier's reward before and after the agent's work (and for
# ops-world the README's promote and sheet), destroy.
# Real denv-cp, denvd and Docker.
suite=examples
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"

# healthy REF: the environment runs on its current version, marked healthy.
healthy() {
	denv env get "$1" >"$tmp/env.json" 2>&1 || return 1
	denv env versions "$1" >"$tmp/versions.json" 2>&1 || return 1
	"$top/python/.venv/bin/python" - "$tmp/env.json" "$tmp/versions.json" <<'EOF'
import json, sys
env = json.load(open(sys.argv[1]))["environment"]
vers = json.load(open(sys.argv[2]))
vers = vers.get("versions", vers) if isinstance(vers, dict) else vers
cur = [v for v in vers if v.get("ID") == env.get("CurrentVersionID")]
sys.exit(0 if env.get("Status") == "running" and cur and cur[0].get("Healthy") is True else 1)
EOF
}

echo "1..19"
if ! sh "$top/t/images.sh" --quiet >"$tmp/images.log" 2>&1; then
	echo "ok 1 # SKIP Docker or the local images are not usable here: $(tail -n 1 "$tmp/images.log")"
	exit 0
fi
stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined" "$tmp/start.log"

# ---- examples/quickstart: PostgreSQL, an agent box, a file verifier ----
qs=$top/examples/quickstart/compose.yaml
denv project create --kind rl-environment quickstart >/dev/null 2>&1
denv deploy --project quickstart -f "$qs" --wait >"$tmp/qs-deploy.log" 2>&1
ok $? "quickstart: deploy --wait succeeds" "$tmp/qs-deploy.log"
healthy quickstart/alpha
ok $? "quickstart: alpha runs on a healthy version" "$tmp/versions.json"
uid=$(exec_out quickstart/alpha box sh -c 'id -u; echo 42 > /home/agent/answer.txt')
[ "$uid" = 1000 ]
ok $? "quickstart: the agent is uid 1000 and writes its answer (got '$uid')"
rows=$(exec_out quickstart/alpha box psql -tAc "select 1 + 1")
[ "$rows" = 2 ]
ok $? "quickstart: the box reaches PostgreSQL as db (got '$rows')"
denv verify quickstart/alpha >"$tmp/qs-verify.log" 2>&1
grep -q '^reward: 1 ' "$tmp/qs-verify.log"
ok $? "quickstart: verify gives reward 1" "$tmp/qs-verify.log"

# ---- examples/ops-world: orders, a refund queue, an ops box, warm seed ----
ow=$top/examples/ops-world
denv project create --kind rl-environment ops-world >/dev/null 2>&1
denv deploy --project ops-world -f "$ow/compose.yaml" --wait >"$tmp/ow-deploy.log" 2>&1
ok $? "ops-world: deploy --wait succeeds" "$tmp/ow-deploy.log"
grep -Eq '^ *warm +ok' "$tmp/ow-deploy.log"
ok $? "ops-world: the warm phase ran" "$tmp/ow-deploy.log"
healthy ops-world/alpha
ok $? "ops-world: alpha runs on a healthy version" "$tmp/versions.json"
n=$(exec_out ops-world/alpha opsbox psql -tAc "select count(*) from orders where status = 'paid'")
[ "$n" = 100 ]
ok $? "ops-world: warm loaded 100 paid orders (got '$n')"
n=$(exec_out ops-world/alpha opsbox redis-cli -h queue LLEN refunds)
[ "$n" = 13 ]
ok $? "ops-world: warm queued 13 refunds (got '$n')"
uid=$(exec_out ops-world/alpha opsbox id -u)
[ "$uid" = 1000 ]
ok $? "ops-world: the agent is uid 1000 (got '$uid')"

# Nothing done yet: the grader must say 0 (and the agent is unfrozen after).
denv verify --resume ops-world/alpha >"$tmp/ow-verify0.log" 2>&1
grep -q '^reward: 0 ' "$tmp/ow-verify0.log"
ok $? "ops-world: verify before the work gives reward 0" "$tmp/ow-verify0.log"
# Half the work: some refunds left on the queue is still 0.
exec_out ops-world/alpha opsbox sh -c \
	'for i in 1 2 3; do id=$(redis-cli -h queue --raw LPOP refunds); psql -qc "update orders set status = '\''refunded'\'' where id = $id"; done; echo 3 > $HOME/answer.txt' >/dev/null
denv verify --resume ops-world/alpha >"$tmp/ow-verify1.log" 2>&1
grep -q '^reward: 0 ' "$tmp/ow-verify1.log"
ok $? "ops-world: three of thirteen refunds done gives reward 0" "$tmp/ow-verify1.log"
out=$(exec_out ops-world/alpha opsbox sh -c "$(cat "$ow/solution.sh")")
case $out in *"refunded 10 orders, 13 in all"*) r=0 ;; *) r=1 ;; esac
ok $r "ops-world: the reference solution refunds the other ten (got '$out')"
denv verify ops-world/alpha >"$tmp/ow-verify2.log" 2>&1
grep -q '^reward: 1 ' "$tmp/ow-verify2.log"
ok $? "ops-world: verify after the work gives reward 1" "$tmp/ow-verify2.log"
# The README's promotion: the gates on a fresh fork of alpha's version.
denv promote ops-world alpha staging >"$tmp/ow-promote.log" 2>&1
ok $? "ops-world: promote alpha staging passes every gate" "$tmp/ow-promote.log"
denv sheet ops-world/staging >"$tmp/ow-sheet.log" 2>&1 && grep -q '^  5 held ' "$tmp/ow-sheet.log" &&
	grep -Eq '^ +gate.replay +ok .*"rewards":\[0,0,0\]' "$tmp/ow-sheet.log"
ok $? "ops-world: the sheet shows egress held and three replays at reward 0" "$tmp/ow-sheet.log"

# ---- destroy ----
r=0
for e in quickstart/alpha ops-world/alpha ops-world/staging; do
	denv env destroy "$e" >/dev/null 2>&1 || r=1
done
for e in quickstart/alpha ops-world/alpha ops-world/staging; do
	stack_wait_destroyed "$e" || r=1
done
ok $r "every environment destroyed"
