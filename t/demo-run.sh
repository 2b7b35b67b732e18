#!/bin/sh
# demo-run.sh: the quickstart, end to end, on this machine (run by `make demo`
# through t/demo.sh once the programs are built).
#
# A control plane on a temporary store, a sidecar joined to it, then: a project,
# a deploy of a PostgreSQL + agent-box world with a verifier, exec as the agent,
# a row in the database, snapshot, fork (the fork sees the data), verify
# (reward 1), the symlink attack (reward 0, refused), cleanup. Every step is
# printed; any broken expectation stops the demo with a non-zero exit.
#
# Images come from t/fixtures/images (no registry here): denv-test/debian runs
# PostgreSQL, denv-test/busybox is the agent's box and the grader.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$top/bin
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denv-demo.XXXXXX")
. "$top/t/lib/stack.sh"

say() { printf '\n== %s\n' "$*"; }
fail() { printf '\ndemo: FAILED: %s\n' "$*" >&2; exit 1; }

cleanup() {
	status=$?
	stack_stop
	if [ $status -ne 0 ]; then
		echo "--- denv-cp log (last 30 lines)"; tail -n 30 "$tmp/cp.log" 2>/dev/null || true
		echo "--- denvd log (last 30 lines)"; tail -n 30 "$tmp/denvd.log" 2>/dev/null || true
	fi
	rm -rf "$tmp"
	exit $status
}
trap cleanup EXIT INT TERM

# denv ARGS...: run the CLI, showing the command line (on stderr, so that
# output captured from it stays clean).
denv() {
	printf '$ denv %s\n' "$*" >&2
	"$bin/denv" "$@"
}

# expect_eq WHAT GOT WANT
expect_eq() {
	if [ "$2" = "$3" ]; then echo "ok: $1 is $3"; else fail "$1: expected '$3', got '$2'"; fi
}

json_field() { stack_json "$1"; }

say "set-up: Docker engine and fixture images"
sh "$top/t/docker-up.sh" all || fail "Docker is not usable here"

say "a control plane on a temporary store, and a sidecar joins it"
stack_start || fail "the control plane or the sidecar did not start"
echo "denv-cp at $DENV_SERVER"
denv host list | grep -E '"(Name|Status|storage)"' || true

say "a project and its compose file"
denv project create --kind rl-environment quickstart >/dev/null
cat >"$tmp/compose.yaml" <<'EOF'
x-denv:
  kind: rl-environment
  agent:
    service: box
  verifier:
    image: denv-test/busybox:latest
    command: ["sh", "-c", "[ \"$(cat /submission/home/agent/answer.txt)\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt"]
    collect: ["/home/agent/answer.txt"]
services:
  db:
    image: denv-test/debian:latest
    command: ["postgres"]
    environment: { POSTGRES_PASSWORD: world }
    volumes: ["pg:/var/lib/postgresql/data"]
    healthcheck: { test: ["CMD-SHELL", "pg_isready -U postgres"], interval: 1s, retries: 60 }
  box:
    image: denv-test/busybox:latest
    user: "1000:1000"
    command: ["sleep", "infinity"]
    environment: { HOME: /home/agent }
    volumes: ["home:/home/agent"]
    depends_on: [db]
volumes: { pg: {}, home: {} }
EOF
cat "$tmp/compose.yaml"

say "deploy: every phase, with evidence"
denv deploy --project quickstart -f "$tmp/compose.yaml" || fail "deploy did not succeed"

say "act as the agent (never root) and leave a row in the database"
out=$(denv exec --service box quickstart/alpha -- sh -c 'id -u; echo 42 > /home/agent/answer.txt')
expect_eq "the agent's uid" "$out" 1000
denv exec --service db quickstart/alpha -- psql -U postgres -c "create table t(x int); insert into t values (1)" >/dev/null

say "snapshot: freeze writers, checkpoint, capture every volume at one instant"
denv snapshot quickstart/alpha || fail "snapshot did not succeed"

say "fork: a new world with the same data"
denv fork quickstart/alpha --name f1 || fail "fork did not succeed"
out=$(denv exec --service box quickstart/f1 -- cat /home/agent/answer.txt)
expect_eq "the fork's answer file" "$out" 42
out=$(denv exec --service db quickstart/f1 -- psql -U postgres -tAc "select count(*) from t")
expect_eq "rows in the fork's table" "$out" 1

say "verify: the grader runs on a fork of a capture, after the agent is frozen"
denv verify quickstart/f1 | tee "$tmp/verify.out" || fail "verify did not succeed"
grep -q '^reward: 1' "$tmp/verify.out" || fail "expected reward 1"

say "the symlink attack: the agent points its answer at /etc/passwd"
denv fork quickstart/alpha --name f2 >/dev/null || fail "second fork did not succeed"
denv exec --service box quickstart/f2 -- sh -c 'rm -f /home/agent/answer.txt; ln -s /etc/passwd /home/agent/answer.txt' >/dev/null
denv verify quickstart/f2 | tee "$tmp/verify2.out" || true
grep -q '^reward: 0' "$tmp/verify2.out" || fail "expected reward 0 for the symlink"
grep -q 'refused' "$tmp/verify2.out" || fail "expected the submission to be refused"

say "cleanup"
for e in f2 f1 alpha; do denv env destroy "quickstart/$e" >/dev/null || fail "destroy $e"; done
for e in f2 f1 alpha; do
	stack_wait_destroyed "quickstart/$e" || fail "environment $e was not destroyed within 60 s"
	echo "ok: $e destroyed"
done
echo "demo: all steps passed"
