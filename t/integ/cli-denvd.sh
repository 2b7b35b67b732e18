#!/bin/sh
# cli-denvd.sh: bin/denv as a script uses it, against the real denv-cp, a
# joined denvd and Docker: exec passes the command's stdout, stderr and exit
# code through (124 on a timeout, 125 when denv cannot run it, --json keeps
# the object), a service frozen by verify is refused with how to resume it;
# bare environment names; files put by docker cp's rules, owned by the
# directory the upload lands in unless --owner.
suite=cli-denvd
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
# in_box CMD: a shell command's stdout in the box (for checks, not under test).
in_box() { denv exec --service box w1/box1 -- sh -c "$1" 2>/dev/null; }

suite_need_stack all
stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined"

denv project create w1 >/dev/null && denv project create w1b >/dev/null
cat >"$tmp/compose.yaml" <<'EOF'
x-denv:
  agent: { service: box }
  verifier:
    image: denv-test/busybox:latest
    command: ["sh", "-c", "echo 1 > /logs/verifier/reward.txt"]
    collect: ["/home/agent/answer.txt"]
services:
  box:
    image: denv-test/busybox:latest
    user: "1000:1000"
    command: ["sleep", "infinity"]
    environment: { HOME: /home/agent }
    volumes: ["home:/home/agent"]
  deb:
    image: denv-test/debian:latest
    command: ["sleep", "infinity"]
volumes: { home: {} }
EOF
denv deploy --project w1 --env box1 -f "$tmp/compose.yaml" >"$tmp/deploy.log" 2>&1
ok $? "deploy w1/box1"

# ---- exec ----
run exec --service box w1/box1 -- sh -c 'echo o1; echo e1 >&2; echo o2; echo e2 >&2; exit 3'
is_rc 3 "exec exits with the command's exit code"
[ "$(cat "$tmp/out")" = "o1
o2" ]
ok $? "the command's stdout, in order, on stdout only"
[ "$(cat "$tmp/err")" = "e1
e2" ]
ok $? "the command's stderr, in order, on stderr only (no denv: line)"
run exec --service box w1/box1 -- true
is_rc 0 "exit 0"
[ ! -s "$tmp/out" ] && [ ! -s "$tmp/err" ]
ok $? "and nothing printed"
for code in 1 2; do
	run exec --service box w1/box1 -- sh -c "exit $code"
	[ "$rc" -eq "$code" ] && ! grep -q '^denv:' "$tmp/err"
	ok $? "exit $code is the command's: no denv: line (exit $rc)"
done
run exec --service box w1/box1 -- id -u
[ "$rc" -eq 0 ] && [ "$(cat "$tmp/out")" = 1000 ]
ok $? "runs as the service's user: $(cat "$tmp/out")"
run exec --json --service box w1/box1 -- sh -c 'echo out; echo err >&2; exit 3'
is_rc 0 "--json exits 0 whatever the command's code"
"$top/python/.venv/bin/python" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if (d["exit_code"], d["stdout"], d["stderr"]) == (3, "out\n", "err\n") else 1)' "$tmp/out"
ok $? "--json prints {exit_code, stdout, stderr}"
run exec --timeout 1 --service box w1/box1 -- sleep 30
is_rc 124 "a command past --timeout exits 124"
grep -q '^denv: env.exec: timed out after 1 s' "$tmp/err"
ok $? "and says it timed out"
run exec --service nosuch w1/box1 -- true
is_rc 125 "denv cannot run it (no such service): 125"
grep -q '^denv: .*no service "nosuch"' "$tmp/err"
ok $? "with a denv: line naming the service"
run exec w1/box1 -- true
is_rc 125 "a usage error of exec is 125 too"

# ---- bare names: box1 is w1's alone, alpha is in w1 and w1b ----
run exec --service box box1 -- echo bare
[ "$rc" -eq 0 ] && [ "$(cat "$tmp/out")" = bare ]
ok $? "exec with a bare name one project has (exit $rc)"
run fork --name r1 box1
is_rc 0 "fork --name r1 box1 (a bare name)"
run exec --service box r1 -- true
is_rc 0 "the fork answers by its bare name"
run env get alpha
is_rc 1 "a bare name two projects have"
grep -qF 'denv: environment "alpha" is in more than one project; use <project>/<env>: ' "$tmp/err" &&
	grep -qF 'w1/alpha' "$tmp/err" && grep -qF 'w1b/alpha' "$tmp/err"
ok $? "says use <project>/<env> and lists w1/alpha and w1b/alpha"
run exec --service box nosuch -- true
is_rc 125 "exec with an unknown bare name: 125"
grep -qF 'denv: no environment named "nosuch"; use <project>/<env> or an id (env_...); there are: ' "$tmp/err" &&
	grep -qF 'w1/box1' "$tmp/err"
ok $? "says what to use and lists candidates"

# ---- files put: docker cp's rules; owner of the landing directory ----
mkdir -p "$tmp/fixtures/sub"
echo alpha >"$tmp/fixtures/a.txt"
echo beta >"$tmp/fixtures/sub/b.txt"
echo other >"$tmp/other.txt"
run files put --service box w1/box1 "$tmp/fixtures" /home/agent/fixtures
is_rc 0 "files put a directory to a missing target"
[ "$(in_box 'cat /home/agent/fixtures/a.txt /home/agent/fixtures/sub/b.txt')" = "alpha
beta" ] && [ "$(in_box 'test -e /home/agent/fixtures/fixtures && echo nested')" = "" ]
ok $? "it became the target: /home/agent/fixtures/a.txt, no fixtures/fixtures"
grep -q '"path": "/home/agent/fixtures"' "$tmp/out" && grep -q '"owner": "1000:1000"' "$tmp/out"
ok $? "the answer says where it landed and whose it is"
[ "$(in_box 'stat -c %u:%g /home/agent/fixtures /home/agent/fixtures/a.txt /home/agent/fixtures/sub /home/agent/fixtures/sub/b.txt | sort -u')" = 1000:1000 ]
ok $? "everything is owned by /home/agent's owner (1000:1000), not root"
run files put --service box w1/box1 "$tmp/fixtures" /home/agent/fixtures
is_rc 0 "files put a directory into an existing directory"
[ "$(in_box 'cat /home/agent/fixtures/fixtures/sub/b.txt')" = beta ]
ok $? "it went inside: /home/agent/fixtures/fixtures/sub/b.txt"
run files put --service box w1/box1 "$tmp/other.txt" /home/agent/fixtures
[ "$rc" -eq 0 ] && [ "$(in_box 'cat /home/agent/fixtures/other.txt')" = other ]
ok $? "a file into an existing directory goes inside under its name"
run files put --service box w1/box1 "$tmp/other.txt" /home/agent/renamed.txt
[ "$rc" -eq 0 ] && [ "$(in_box 'cat /home/agent/renamed.txt; stat -c %u /home/agent/renamed.txt')" = "other
1000" ]
ok $? "a file to a missing path becomes that path"
run files put --service box w1/box1 "$tmp/fixtures/a.txt" /home/agent/renamed.txt
[ "$rc" -eq 0 ] && [ "$(in_box 'cat /home/agent/renamed.txt')" = alpha ]
ok $? "a file over an existing file replaces it"
run files put --service box w1/box1 "$tmp/fixtures" /home/agent/renamed.txt
[ "$rc" -eq 1 ] && grep -q '^denv: env.put: /home/agent/renamed.txt is a file' "$tmp/err"
ok $? "a directory over a file is refused"
run files put --service box w1/box1 "$tmp/other.txt" /home/agent/no/such
[ "$rc" -eq 1 ] && grep -q 'denv: env.put: /home/agent/no does not exist' "$tmp/err"
ok $? "a missing parent is refused (docker cp creates none)"
run files put --service box w1/box1 "$tmp/other.txt" /tmp/landed.txt
[ "$rc" -eq 0 ] && [ "$(in_box 'stat -c %u:%g /tmp/landed.txt')" = 0:0 ]
ok $? "in root's /tmp it is root's: the landing directory decides"
run files put --owner 1234:5678 --service box w1/box1 "$tmp/fixtures" /home/agent/owned
[ "$rc" -eq 0 ] && [ "$(in_box 'stat -c %u:%g /home/agent/owned /home/agent/owned/sub/b.txt | sort -u')" = 1234:5678 ]
ok $? "--owner 1234:5678 overrides"
run files put --owner nobody:nogroup --service deb w1/box1 "$tmp/other.txt" /tmp/nobody.txt
[ "$rc" -eq 0 ] && [ "$(denv exec --service deb w1/box1 -- stat -c %u:%g /tmp/nobody.txt)" = 65534:65534 ]
ok $? "--owner by name, from the image's /etc/passwd and /etc/group"
run files put --owner agent --service box w1/box1 "$tmp/other.txt" /tmp/x.txt
[ "$rc" -eq 1 ] && grep -q 'agent' "$tmp/err" && grep -q '/etc/passwd' "$tmp/err"
ok $? "an owner name the image lacks is refused"

# ---- frozen by verify ----
denv verify w1/box1 >"$tmp/verify.log" 2>&1
ok $? "verify w1/box1 (the agent stays frozen)"
run exec --service box w1/box1 -- true
is_rc 125 "exec into the frozen agent fails"
grep -qF 'denv: env.exec: service "box" is frozen by verify' "$tmp/err" &&
	grep -qF 'denv verify --resume w1/box1' "$tmp/err" && grep -qF 'denv snapshot w1/box1' "$tmp/err"
ok $? "it says frozen by verify and how to resume: $(head -c 300 "$tmp/err")"
run files put --service box w1/box1 "$tmp/other.txt" /home/agent/late.txt
[ "$rc" -eq 1 ] && grep -qF 'service "box" is frozen by verify' "$tmp/err"
ok $? "files put into it says so too"
denv snapshot w1/box1 >"$tmp/snapshot.log" 2>&1
ok $? "snapshot (unpauses what verify left paused)"
run exec --service box w1/box1 -- true
is_rc 0 "after it, exec runs again"

suite_done
