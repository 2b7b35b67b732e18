# stack-tap.sh: the frame of a TAP script that drives the CLI against a real
# control plane and a joined sidecar (t/lib/stack.sh) on real Docker.
# Source it with $suite set; it makes $tmp, sources stack.sh and sets the trap.
#   needs: $suite (names the temp dir: denv-$suite.XXXXXX)
#   sets:  top, tmp, t (tests so far), failed (failures so far)
#   hooks: suite_cleanup, when the script defines it again, runs after
#          stack_stop and before $tmp is removed (kill a listener, remove
#          built images).
# The helpers below write a command's output to $tmp/out and $tmp/err, so a
# failing ok shows what the command said without each test echoing it.
set -u
top=${DENV_TOP:-$(pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denv-$suite.XXXXXX")
. "$top/t/lib/stack.sh"
# denv is bin/denv itself, not a shell function: `denv ... &` then gives
# $! the CLI's own pid, so a test can kill the client.
PATH=$top/bin:$PATH
PY=$top/python/.venv/bin/python
t=0
failed=0

# ok STATUS NAME [LOG]: one TAP line; a failure shows LOG's tail when given,
# else the head of $tmp/out and $tmp/err.
ok() {
	t=$((t + 1))
	if [ "$1" = 0 ]; then
		echo "ok $t - $2"
		return
	fi
	failed=$((failed + 1))
	echo "not ok $t - $2"
	if [ -n "${3:-}" ]; then
		[ -s "$3" ] && tail -n 25 "$3" | sed 's/^/#   /'
		return
	fi
	[ -s "$tmp/out" ] && sed -n '1,40s/^/#   out: /p' "$tmp/out"
	[ -s "$tmp/err" ] && sed -n '1,12s/^/#   err: /p' "$tmp/err"
}

# A script that has more to undo defines its own suite_cleanup after this.
suite_cleanup() { :; }
suite_stop() {
	stack_stop
	suite_cleanup
	rm -rf "$tmp"
}
trap suite_stop EXIT
trap 'exit 1' INT TERM

# suite_need_stack [busybox|all]: skip unless root and Docker with the fixture images.
suite_need_stack() {
	if [ "$(id -u)" != 0 ] || ! sh "$top/t/docker-up.sh" "${1:-all}" >/dev/null 2>&1; then
		echo "1..0 # SKIP needs root and Docker with the fixture images"
		exit 0
	fi
}

# suite_done: the plan line; the exit status says whether every test passed.
suite_done() {
	echo "1..$t"
	[ "$failed" = 0 ]
	exit $?
}

# until_ok SECONDS CMD...: run CMD every 0.2 s until it succeeds (1: it never did).
until_ok() {
	n=$(($1 * 5))
	shift
	while ! "$@"; do
		n=$((n - 1)); [ $n -gt 0 ] || return 1; sleep 0.2
	done
}
# run ARGS...: denv with stdout and stderr in $tmp/out and $tmp/err; $rc.
run() {
	"$top/bin/denv" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
}
is_rc() { [ "$rc" -eq "$1" ]; ok $? "$2 (exit $rc, want $1)"; }
has() { grep -qF -- "$1" "$tmp/out"; }
# api METHOD PATH [BODY [HEADER]]: one REST call with the stack's key; the
# answer in $tmp/out, its HTTP status in $code.
api() {
	code=$(curl -s -o "$tmp/out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $DENV_API_KEY" \
		-H 'Content-Type: application/json' ${4:+-H "$4"} ${3:+--data "$3"} "$DENV_SERVER$2")
}
# py EXPR: evaluate a Python expression over d = the JSON document in $tmp/doc.
py() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$tmp/doc" "$1"; }
# doc_of DEP: that deployment as JSON into $tmp/doc.
doc_of() { denv deployment get "$1" >"$tmp/doc" 2>/dev/null; }
# dep_of_out: the deployment id `denv deploy` printed into $tmp/out.
dep_of_out() { sed -n 's/^deployment \(dep_[A-Za-z0-9]*\) (environment.*/\1/p' "$tmp/out" | head -n 1; }
# ev_of DEP PHASE: that phase's evidence as JSON into $tmp/doc.
ev_of() {
	denv deployment get "$1" 2>/dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
print(json.dumps([p for p in d["phases"] if p["Name"] == sys.argv[1]][0]["Evidence"]))' "$2" >"$tmp/doc"
}
# exec_out ENV SERVICE ARGV...: the command's stdout, trimmed (plain or --json output).
exec_out() {
	e=$1 s=$2
	shift 2
	denv exec --service "$s" "$e" -- "$@" >"$tmp/exec" 2>/dev/null
	"$PY" -c '
import json, sys
text = open(sys.argv[1]).read()
try:
    print(json.loads(text)["stdout"].strip())
except Exception:
    print(text.strip())' "$tmp/exec"
}

# suite_rm_env ENV_ID: remove that environment's containers and network
# (for hosts stack_stop does not know: their data dirs are not $tmp/data).
suite_rm_env() {
	p=$(echo "$1" | tr 'A-Z' 'a-z')
	for c in $(docker ps -aq --filter "label=com.docker.compose.project=$p" 2>/dev/null); do
		docker rm -f "$c" >/dev/null 2>&1 || true
	done
	docker network rm "${p}_default" >/dev/null 2>&1 || true
}
# suite_rm_envs DATA_DIR...: suite_rm_env for every environment under each.
suite_rm_envs() {
	for dir in "$@"; do
		for d in "$dir"/envs/*; do
			[ -d "$d" ] && suite_rm_env "$(basename "$d")"
		done
	done
}
# wait_dep DEP [SECONDS]: until the deployment is over (default 180 s); 0
# when it succeeded. Uses api, so $tmp/out holds the deployment after.
wait_dep() {
	n=$((${2:-180} * 2))
	while :; do
		api GET "/v1/deployments/$1"
		case $(jq -r .deployment.Status "$tmp/out") in
		succeeded) return 0 ;;
		failed|rolled_back) return 1 ;;
		esac
		n=$((n - 1)); [ $n -gt 0 ] || return 1; sleep 0.5
	done
}
