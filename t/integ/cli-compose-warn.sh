#!/bin/sh
# cli-compose-warn.sh: compose keys denv does not act on are warned about at
# resolve, with the exact text, in three places: the deploy response, the
# resolve phase's evidence, and the CLI's stderr (with and without --wait).
# The resolve phase needs no host, so a host-less bin/denv-cp is enough.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/cli/lib.sh"
if [ ! -x "$top/bin/denv" ] || [ ! -x "$top/bin/denv-cp" ]; then
	echo "1..0 # SKIP bin/denv or bin/denv-cp is not built"
	exit 0
fi
KEY=dak_compose_warn_test_key_0123456789
start_cp DENV_BOOTSTRAP_KEY=$KEY || { echo "1..0 # SKIP denv-cp did not start"; exit 0; }
export DENV_SERVER=$server DENV_API_KEY=$KEY
cd "$tmp" || exit 1

run project create warn
is_rc 0 "project create"

cat >typo.yaml <<'EOF'
services:
  a:
    image: denv-test/busybox
    comand: ["sleep", "infinity"]
    restart: always
x-denv:
  egres: deny
EOF
cat >want <<'EOF'
warning: services.a.comand: unknown key (did you mean command?)
warning: services.a.restart: ignored by denv
warning: x-denv.egres: unknown key (did you mean egress?)
EOF
want_json='["services.a.comand: unknown key (did you mean command?)", "services.a.restart: ignored by denv", "x-denv.egres: unknown key (did you mean egress?)"]'
cat >clean.yaml <<'EOF'
services:
  a:
    image: denv-test/busybox
    command: ["sleep", "infinity"]
EOF

# ---- without --wait: the response carries them, stderr shows them ----
run deploy --project warn --env nowait -f typo.yaml --wait=false
is_rc 0 "deploy --wait=false of a file with warnings"
jq_ok "d['warnings'] == $want_json" "the deploy response lists the warnings"
[ "$(cat "$tmp/err")" = "$(cat want)" ]
ok $? "stderr has exactly the warning lines"
DEP=$(jq_get 'd["deployment"]["ID"]')

# ---- the resolve phase's evidence (the orchestrator runs it without a host) ----
i=0
while [ $i -lt 100 ]; do
	run deployment get "$DEP"
	[ "$(jq_get 'd["phases"][0]["Status"]')" != pending ] && break
	sleep 0.1
	i=$((i + 1))
done
jq_ok 'd["phases"][0]["Name"] == "resolve" and d["phases"][0]["Status"] == "ok"' "resolve ran"
jq_ok "d['phases'][0]['Evidence']['warnings'] == $want_json" "the resolve evidence holds the same warnings"
jq_ok "d['deployment']['Params']['spec']['warnings'] == $want_json" "and so does the pinned spec"

# ---- with --wait (it fails later, at placement: no host): stderr ----
timeout 60 "$DENV" deploy --project warn --env waited -f typo.yaml >"$tmp/out" 2>"$tmp/err"
rc=$?
is_rc 1 "deploy --wait of a deployment that fails for want of a host"
grep -q '^  resolve    ok' "$tmp/out"
ok $? "the resolve phase line is on stdout"
grep '^warning: ' "$tmp/err" >got
cmp -s got want
ok $? "--wait prints each warning once, on stderr"
! grep -q '^warning: ' "$tmp/out"
ok $? "no warning lines on stdout"

# ---- a clean file: no warnings anywhere ----
run deploy --project warn --env clean -f clean.yaml --wait=false
is_rc 0 "deploy --wait=false of a clean file"
jq_ok 'd["warnings"] == []' "an empty warnings list in the response"
! grep -q 'warning' "$tmp/err"
ok $? "nothing on stderr"

done_testing
