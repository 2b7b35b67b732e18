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
cp_pid=
sc_pid=

say() { printf '\n== %s\n' "$*"; }
fail() { printf '\ndemo: FAILED: %s\n' "$*" >&2; exit 1; }

cleanup() {
	status=$?
	[ -n "$sc_pid" ] && kill "$sc_pid" 2>/dev/null && wait "$sc_pid" 2>/dev/null
	[ -n "$cp_pid" ] && kill "$cp_pid" 2>/dev/null && wait "$cp_pid" 2>/dev/null
	# Containers of this run only (a mount under its temp dir), then their
	# networks: a destroy that was still running when denvd stopped leaves them.
	nets=
	for c in $(docker ps -aq 2>/dev/null); do
		if docker inspect -f '{{range .Mounts}}{{.Source}} {{end}}' "$c" 2>/dev/null | grep -q "$tmp"; then
			nets="$nets $(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}' "$c" 2>/dev/null)"
			docker rm -f "$c" >/dev/null 2>&1 || true
		fi
	done
	for n in $nets; do
		case $n in bridge|host|none) ;; *) docker network rm "$n" >/dev/null 2>&1 || true ;; esac
	done
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

json_field() { "$top/python/.venv/bin/python" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

say "set-up: Docker engine and fixture images"
sh "$top/t/docker-up.sh" all || fail "Docker is not usable here"

say "control plane on a temporary store"
export DENV_API_KEY=dak_demo_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
DENV_BOOTSTRAP_KEY=$DENV_API_KEY "$bin/denv-cp" -addr 127.0.0.1:0 -db "$tmp/store" >"$tmp/cp.log" 2>&1 &
cp_pid=$!
n=0
until grep -q 'listening on' "$tmp/cp.log"; do
	n=$((n + 1)); [ $n -lt 100 ] || fail "denv-cp did not start"; sleep 0.1
done
export DENV_SERVER=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$tmp/cp.log" | head -n 1)
echo "denv-cp at $DENV_SERVER"

say "a sidecar joins"
token=$("$bin/denv" host join-token | json_field 'd["token"]')
"$bin/denvd" join --server "$DENV_SERVER" --token "$token" --state "$tmp/host.json" \
	--data "$tmp/data" --probe-url http://192.0.2.1/ >"$tmp/denvd.log" 2>&1 &
sc_pid=$!
n=0
until "$bin/denv" host list 2>/dev/null | grep -q '"connected": true'; do
	n=$((n + 1)); [ $n -lt 100 ] || fail "denvd did not connect"; sleep 0.2
done
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
printf '%s\n' "$out"
expect_eq "the agent's uid" "$(printf '%s\n' "$out" | json_field 'd["stdout"].strip()')" 1000
denv exec --service db quickstart/alpha -- psql -U postgres -c "create table t(x int); insert into t values (1)" >/dev/null

say "snapshot: freeze writers, checkpoint, capture every volume at one instant"
denv snapshot quickstart/alpha || fail "snapshot did not succeed"

say "fork: a new world with the same data"
denv fork quickstart/alpha --name f1 || fail "fork did not succeed"
out=$(denv exec --service box quickstart/f1 -- cat /home/agent/answer.txt | json_field 'd["stdout"].strip()')
expect_eq "the fork's answer file" "$out" 42
out=$(denv exec --service db quickstart/f1 -- psql -U postgres -tAc "select count(*) from t" | json_field 'd["stdout"].strip()')
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
	n=0
	until [ "$("$bin/denv" env get "quickstart/$e" 2>/dev/null | json_field 'd["environment"]["Status"]' 2>/dev/null)" = destroyed ]; do
		n=$((n + 1)); [ $n -lt 120 ] || fail "environment $e was not destroyed within 60 s"; sleep 0.5
	done
	echo "ok: $e destroyed"
done
echo "demo: all steps passed"
