#!/bin/sh
# cp-promote.sh: promote and the data sheet on a real denv-cp, a joined
# denvd and real Docker (orch_promote.c, api_promote.c, denvd's env.digest):
#   - a promotion that passes every gate: the target runs the version, the
#     dataset digests are recorded, a second promotion replaces the target
#     and finds the datasets matching;
#   - one promotion failing each gate, with its reason: consistency (the
#     snapshot's copy changed on disk), replay (a verifier whose reward
#     varies), invariants (a declared check that fails; egress opened
#     against what the target ran), soak (a service that exits), and fork
#     (a first service that cannot answer); the target is left as it was
#     and the candidate is destroyed;
#   - the sheet's fields: image digests, dataset digests, the five
#     protections with their evidence, caps, the probe, verifier, gates.
# Prints TAP; removes its containers, networks and data even on failure.
suite=cp-promote
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
# dep_doc: the deployment the last run started, into $tmp/doc.
dep_doc() { denv deployment get "$(dep_of_out)" >"$tmp/doc" 2>/dev/null; }
# phase NAME: "status|error" of that phase of $tmp/doc.
phase() { py "[(p['Status'] + '|' + p['Error']) for p in d['phases'] if p['Name'] == '$1'][0]"; }
env_doc() { denv env get "$1" >"$tmp/doc" 2>/dev/null; }

if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "1..0 # SKIP Docker or the fixture images are not usable here"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP needs root (denvd freezes containers and reads their trees)"
	exit 0
fi
stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined"
denv project create --kind rl-environment pro >/dev/null 2>&1

# compose VERIFIER_CMD [EXTRA_XDENV] [SERVICE_CMD]: the agent box, its home
# volume, a busybox verifier, two replays and a 2 s soak.
compose() {
	cat <<YAML
x-denv:
  agent: { service: box }
  verifier:
    image: denv-test/busybox:latest
    command: ["sh", "-c", "$1"]
    collect: ["/home/agent/answer.txt"]
  promote:
    replays: 2
    soak: 2s
    invariants:
      - { name: home, service: box, command: "test -d /home/agent" }
${2:-}
services:
  box:
    image: denv-test/busybox:latest
    user: "1000:1000"
    command: ${3:-["sleep", "infinity"]}
    environment: { HOME: /home/agent }
    volumes: ["home:/home/agent"]
    deploy: { resources: { limits: { memory: 128m, pids: 64 } } }
volumes: { home: {} }
YAML
}
compose 'echo 1 > /logs/verifier/reward.txt' >"$tmp/good.yaml"
run deploy --project pro --env alpha -f "$tmp/good.yaml"
ok $rc "deploy pro/alpha (exit $rc)"
env_doc pro/alpha
alpha=$(py 'd["environment"]["ID"]')
ver=$(py 'd["environment"]["CurrentVersionID"]')

# ---- a promotion that passes ----
run promote pro alpha staging
ok $rc "promote pro alpha staging passes (exit $rc)"
grep -q "^promoted: staging runs $ver (env_" "$tmp/out"
ok $? "it says what the target runs now"
dep_doc
[ "$(py '[p["Status"] for p in d["phases"]]')" = "['ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok']" ]
ok $? "every gate, apply and the verdict are ok"
[ "$(py '[p["Evidence"] for p in d["phases"] if p["Name"] == "gate.fork"][0]["answered"]')" = True ]
ok $? "gate.fork: the fresh fork answered"
[ "$(py '[p["Evidence"] for p in d["phases"] if p["Name"] == "gate.consistency"][0]["recorded"]')" = True ]
ok $? "gate.consistency: the first promotion records the dataset digests"
[ "$(py '[p["Evidence"] for p in d["phases"] if p["Name"] == "gate.replay"][0]["rewards"]')" = "[1, 1]" ]
ok $? "gate.replay: two replays, the same reward"
[ "$(py '[(c["name"], c["ok"]) for p in d["phases"] if p["Name"] == "gate.invariants" for c in p["Evidence"]["checks"]]')" = "[('nothing deleted', True), ('nothing disabled', True), ('nothing silenced', True), ('home', True)]" ]
ok $? "gate.invariants: the built-in checks and the declared one pass"
[ "$(py '[p["Evidence"] for p in d["phases"] if p["Name"] == "gate.soak"][0]["soaked_for_s"]')" = 2 ]
ok $? "gate.soak: soaked for the declared 2 s"
env_doc pro/staging
staging1=$(py 'd["environment"]["ID"]')
[ "$(py 'd["environment"]["Status"], d["environment"]["CurrentVersionID"], d["environment"]["ParentVersionID"]')" = "('running', '$ver', '$ver')" ]
ok $? "pro/staging is running the promoted version"
run exec --service box pro/staging -- true
ok $rc "exec in pro/staging answers (exit $rc)"

# ---- a second promotion replaces the target ----
run promote pro alpha staging
ok $rc "promoting again to staging passes (exit $rc)"
dep_doc
[ "$(py '[p["Evidence"] for p in d["phases"] if p["Name"] == "gate.consistency"][0]["matches"]')" = True ]
ok $? "gate.consistency: the datasets match the recorded digests"
[ "$(py '[p["Evidence"] for p in d["phases"] if p["Name"] == "apply"][0]["replaced"]')" = "$staging1" ]
ok $? "apply: the old staging environment is replaced"
env_doc "$staging1"
case $(py 'd["environment"]["Status"] + " " + d["environment"]["Name"]') in
"destroyed staging-was-"*) r=0 ;; *) r=1 ;; esac
ok $r "the old staging is destroyed under a name of its own"
env_doc pro/staging
staging2=$(py 'd["environment"]["ID"]')
[ "$staging2" != "$staging1" ] && [ "$(py 'd["environment"]["Status"]')" = running ]
ok $? "pro/staging is the new environment, running"

# ---- the data sheet ----
run sheet --json pro/staging
ok $rc "denv sheet --json pro/staging (exit $rc)"
cp "$tmp/out" "$tmp/doc"
[ "$(py 'd["sheet"]["environment"]["id"], d["sheet"]["version"]["id"]')" = "('$staging2', '$ver')" ]
ok $? "the sheet names the environment and its version"
[ "$(py 'sorted(d["sheet"]["images"])')" = "['box']" ] && py 'd["sheet"]["images"]["box"]' | grep -q .
ok $? "image digests: one per service"
py 'd["sheet"]["datasets"][0]["volume"] + " " + d["sheet"]["datasets"][0]["digest"]' | grep -Eq '^home sha256:[0-9a-f]{64}$'
ok $? "dataset digests: home has its recorded sha256"
[ "$(py '[(p["n"], p["held"]) for p in d["sheet"]["protections"]]')" = "[(1, True), (2, True), (3, True), (4, True), (5, True)]" ]
ok $? "the five protections hold"
[ "$(py '[p for p in d["sheet"]["protections"] if p["n"] == 1][0]["evidence"]["user"]')" = "1000:1000" ]
ok $? "protection 1's evidence: the agent's user"
[ "$(py '[p for p in d["sheet"]["protections"] if p["n"] == 4][0]["evidence"]["caps"]["box"]["pids"]')" = 64 ]
ok $? "protection 4's evidence: the caps of each service"
[ "$(py 'd["sheet"]["caps"]["box"]["memory_mb"], d["sheet"]["caps"]["box"]["pids"]')" = "(128, 64)" ]
ok $? "caps: box's memory and pids limits"
[ "$(py 'd["sheet"]["egress"]["policy"], d["sheet"]["egress"]["probe"]')" = "('deny', 'denied (verified)')" ]
ok $? "egress: denied and the probe's finding"
[ "$(py 'd["sheet"]["verifier"]["collect"]')" = "['/home/agent/answer.txt']" ]
ok $? "the verifier and what it collects"
[ "$(py '[(g["name"], g["status"]) for g in d["sheet"]["promotion"]["gates"]][:5]')" = "[('gate.fork', 'ok'), ('gate.consistency', 'ok'), ('gate.replay', 'ok'), ('gate.invariants', 'ok'), ('gate.soak', 'ok')]" ]
ok $? "the gate results, each with its evidence"
run sheet pro/staging
grep -q '^protections$' "$tmp/out" && grep -q '5 held .*egress is denied and probed' "$tmp/out" &&
	grep -Eq '^ +gate.replay +ok ' "$tmp/out"
ok $? "denv sheet prints the sheet as lines"
run sheet pro/alpha
grep -q '^promotion    none' "$tmp/out"
ok $? "an environment no promote made says so"

# ---- refusals at the route ----
run promote pro alpha alpha
[ "$rc" = 1 ] && grep -q 'target must be another environment of the project' "$tmp/err"
ok $? "promoting an environment to itself is refused"
run promote --version ver_nope pro alpha staging
[ "$rc" = 1 ] && grep -q 'version must be a healthy snapshot of this environment' "$tmp/err"
ok $? "an unknown version is refused"

# failed_at GATE TEXT: the last promote failed at GATE with TEXT in its
# error, the later gates were skipped, and the candidate is destroyed.
failed_at() {
	dep_doc
	st=$(phase "$1")
	echo "# $1: $st"
	case $st in "failed|"*"$2"*) ;; *) return 1 ;; esac
	cand=$(py 'd["deployment"]["EnvID"]')
	stack_wait_destroyed "$cand" || return 1
	grep -q "^not promoted: $1: " "$tmp/out"
}
# target_kept: pro/staging still is $staging2.
target_kept() {
	env_doc pro/staging
	[ "$(py 'd["environment"]["ID"], d["environment"]["Status"]')" = "('$staging2', 'running')" ]
}
# promote_fails ENV GATE TEXT WHAT: promoting pro/ENV to staging fails at
# GATE with TEXT in the reason; three checks.
promote_fails() {
	run promote pro "$1" staging
	[ "$rc" = 1 ]
	ok $? "$4 fails the promotion (exit $rc)"
	failed_at "$2" "$3"
	ok $? "$2 fails: $3"
	target_kept
	ok $? "the target is left as it was"
}

# ---- gate.consistency: the snapshot's copy changed ----
snapdir="$tmp/data/snaps/$alpha/$ver/home"
if [ -d "$snapdir" ]; then
	echo planted >"$snapdir/planted.txt"
	promote_fails alpha gate.consistency "dataset home is sha256:" "a changed snapshot"
	rm -f "$snapdir/planted.txt"
else
	ok 1 "the dir backend keeps the snapshot at $snapdir"
fi

# ---- gate.replay: a verifier whose reward varies ----
compose 'head -c 4 /dev/urandom | od -An -tu4 | tr -d \" \" > /logs/verifier/reward.txt' >"$tmp/rand.yaml"
run deploy --project pro --env rand -f "$tmp/rand.yaml"
ok $rc "deploy pro/rand (exit $rc)"
promote_fails rand gate.replay "replay 2 gave reward" "a varying reward"
dep_doc
[ "$(phase gate.invariants)" = "skipped|" ] && [ "$(phase apply)" = "skipped|" ]
ok $? "the gates after it are skipped"

# ---- gate.invariants: a declared check fails ----
sed 's|command: "test -d /home/agent" }|command: "test -d /home/agent" }\n      - { name: answer-key, service: box, command: "test -e /answer-key" }|' \
	"$tmp/good.yaml" >"$tmp/inv.yaml"
run deploy --project pro --env inv -f "$tmp/inv.yaml"
ok $rc "deploy pro/inv (exit $rc)"
promote_fails inv gate.invariants "answer-key: exited 1" "a failing declared invariant"

# ---- gate.invariants: egress opened against what the target runs ----
sed 's|^x-denv:|x-denv:\n  egress: allow|' "$tmp/good.yaml" >"$tmp/open.yaml"
run deploy --project pro --env open -f "$tmp/open.yaml"
ok $rc "deploy pro/open with egress allowed (exit $rc)"
promote_fails open gate.invariants "nothing disabled: egress was opened (deny to allow)" "opening egress"
run promote pro open fresh
ok $rc "the same version promotes to a new target, which has nothing to keep (exit $rc)"

# ---- a target destroyed by hand, and two promotions racing to one target ----
run env destroy pro/fresh
stack_wait_destroyed pro/fresh
run promote pro alpha fresh
ok $rc "promoting to a target destroyed by hand passes (exit $rc)"
dep_doc
[ "$(py '[p["Evidence"] for p in d["phases"] if p["Name"] == "apply"][0]["replaced"]')" = None ]
ok $? "apply: nothing running was replaced"
denv project envs pro >"$tmp/doc" 2>/dev/null
[ "$(py 'sorted(e["Status"] for e in d["environments"] if e["Name"] == "fresh")')" = "['running']" ] &&
	[ "$(py 'len([e for e in d["environments"] if e["Name"].startswith("fresh-was-") and e["Status"] == "destroyed"])')" = 1 ]
ok $? "one live fresh; the one destroyed by hand has a -was- name of its own"
run promote --wait=false pro alpha race
d1=$(stack_json 'd["deployment"]["ID"]' <"$tmp/out")
run promote --wait=false pro alpha race
d2=$(stack_json 'd["deployment"]["ID"]' <"$tmp/out")
for d in $d1 $d2; do denv deployment watch "$d" >/dev/null 2>&1; done
denv project envs pro >"$tmp/doc" 2>/dev/null
[ "$(py 'len([e for e in d["environments"] if e["Name"] == "race" and e["Status"] == "running"])')" = 1 ]
ok $? "two promotions racing to one target leave one live environment of that name"

# ---- gate.soak: a service that exits ----
compose 'echo 1 > /logs/verifier/reward.txt' '' '["sleep", "6"]' | sed 's/soak: 2s/soak: 12s/' >"$tmp/soak.yaml"
run deploy --project pro --env soak -f "$tmp/soak.yaml"
ok $rc "deploy pro/soak, whose service exits after 6 s (exit $rc)"
promote_fails soak gate.soak "service box did not answer after the soak" "a service gone by the soak's end"

# ---- gate.fork: the version's snapshot is gone from the host ----
env_doc pro/soak
snap="$tmp/data/snaps/$(py 'd["environment"]["ID"]')/$(py 'd["environment"]["CurrentVersionID"]')"
if [ -d "$snap" ]; then
	rm -rf "$snap"
	promote_fails soak gate.fork "not found on this host" "a version whose snapshot is gone"
	dep_doc
	[ "$(phase gate.consistency)" = "skipped|" ]
	ok $? "the gates after it are skipped"
else
	ok 1 "the dir backend keeps the snapshot at $snap"
fi

suite_done
