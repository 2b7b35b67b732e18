# lib.sh: TAP helpers for the CLI's integration tests (sourced, POSIX sh).
# Every test runs with HOME and XDG_CONFIG_HOME in its own temp dir, so the
# real ~/.config is never read or written.
top=${DENV_TOP:-$PWD}
DENV=${DENV_CLI_BIN:-$top/bin/denv}
PY=$top/python/.venv/bin/python
[ -x "$PY" ] || PY=python3
n=0
failed=0
pids=
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denv-cli-test.XXXXXX")
export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/xdg"
mkdir -p "$HOME" "$XDG_CONFIG_HOME"
unset DENV_API_KEY DENV_SERVER DENV_NO_STREAM

cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ok() { # ok COND-STATUS NAME
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $n - $2"
	else
		failed=$((failed + 1))
		echo "not ok $n - $2"
		[ -s "$tmp/out" ] && sed -n '1,15s/^/#   out: /p' "$tmp/out"
		[ -s "$tmp/err" ] && sed -n '1,15s/^/#   err: /p' "$tmp/err"
	fi
}

# run ARGS...: bin/denv with stdout and stderr in $tmp/out, $tmp/err; $rc.
run() {
	"$DENV" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
}

# is_rc WANT NAME
is_rc() { [ "$rc" -eq "$1" ]; ok $? "$2 (exit $rc, want $1)"; }
# out_has TEXT NAME / err_has TEXT NAME: fixed-string match.
out_has() { grep -qF -- "$1" "$tmp/out"; ok $? "$2"; }
err_has() { grep -qF -- "$1" "$tmp/err"; ok $? "$2"; }
# err_is TEXT NAME: stderr is exactly TEXT (one line).
err_is() { [ "$(cat "$tmp/err")" = "$1" ]; ok $? "$2"; }
# jq_ok PYEXPR NAME: a Python expression over d = the JSON on stdout is true.
jq_ok() {
	"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' \
		"$tmp/out" "$1" 2>>"$tmp/err"
	ok $? "$2"
}
# jq_get PYEXPR: print a value from the JSON on stdout.
jq_get() {
	"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$tmp/out" "$1"
}

done_testing() {
	echo "1..$n"
	[ "$failed" -eq 0 ]
	exit $?
}

# start_cp [VAR=VALUE...]: bin/denv-cp on a temp store; sets $server.
start_cp() {
	log="$tmp/cp.log"
	env "$@" "$top/bin/denv-cp" -addr 127.0.0.1:0 -db "$tmp/store" -v 2>"$log" &
	pids="$pids $!"
	i=0
	server=
	while [ $i -lt 100 ]; do
		port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$log" | head -n 1)
		if [ -n "$port" ]; then
			server=http://127.0.0.1:$port
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	echo "# denv-cp did not start:"
	sed 's/^/#   /' "$log"
	return 1
}

# start_fake [--ws]: the fake control plane (t/cli/fake_cp.py); sets $server.
start_fake() {
	rm -f "$tmp/fake.port"
	"$PY" "$top/t/cli/fake_cp.py" "$tmp/fake.port" "$@" 2>"$tmp/fake.log" &
	pids="$pids $!"
	i=0
	while [ $i -lt 100 ] && [ ! -s "$tmp/fake.port" ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -s "$tmp/fake.port" ] || { echo "# fake server did not start"; sed 's/^/#   /' "$tmp/fake.log"; return 1; }
	server=http://127.0.0.1:$(cat "$tmp/fake.port")
}
