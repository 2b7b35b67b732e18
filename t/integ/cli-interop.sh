#!/bin/sh
# cli-interop.sh: denv import and denv export as verbs of the C CLI: their
# usage errors, the hand-over to DENV_PYTHON's denv.interop (server and key
# passed on), and what happens when that Python is missing. The formats
# themselves are python/tests/test_interop.py's; the round trip on a real
# stack is conformance.py's interop and karotte checks (make e2e-frameworks).
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/cli/lib.sh"
if [ ! -x "$top/bin/denv" ] || [ ! -x "$PY" ]; then
	echo "1..0 # SKIP bin/denv or python/.venv is missing"
	exit 0
fi
export PYTHONPATH="$top/python${PYTHONPATH:+:$PYTHONPATH}" DENV_PYTHON="$PY"
fix=$top/t/fixtures/harbor

run import --help
is_rc 0 "denv import --help"
out_has "harbor|karotte <dir>" "the usage names both formats"
run import foo "$fix/docker-image"
is_rc 2 "an unknown format is a usage error"
err_has 'unknown format "foo"' "and says so"
run import harbor "$fix/docker-image" --project p
is_rc 2 "--project without --deploy is a usage error"
run import harbor
is_rc 2 "a missing directory is a usage error"
run import harbor "$fix/docker-image" -o "$tmp/proj"
is_rc 0 "denv import harbor without a credential (nothing is deployed)"
out_has "wrote $tmp/proj/docker-compose.yaml" "it names the file it wrote"
grep -q "verifier:" "$tmp/proj/docker-compose.yaml"
ok $? "the compose file has the verifier"
run import harbor "$fix/docker-image" -o "$tmp/proj"
is_rc 1 "a second import into the same directory fails"
err_has "exists and is not empty" "saying why"
run import harbor "$fix/docker-image" --deploy -o "$tmp/p2"
is_rc 1 "--deploy needs a credential"
err_has "not signed in" "the CLI's own message"

run export "env_x" "$tmp/out"
is_rc 2 "export without --harbor or --openenv is a usage error"
run export --harbor --openenv env_x "$tmp/out"
is_rc 2 "export with both is a usage error"
run export --openenv --project-dir . env_x "$tmp/out"
is_rc 2 "--project-dir is for --harbor"
run export --harbor env_x "$tmp/out"
is_rc 1 "export needs a credential"

# The hand-over: a stand-in Python that prints what it was given.
cat >"$tmp/fakepy" <<'PY'
#!/bin/sh
echo "argv: $*"
echo "server: $DENV_SERVER key: $DENV_API_KEY"
PY
chmod +x "$tmp/fakepy"
DENV_PYTHON="$tmp/fakepy" DENV_API_KEY=dak_k DENV_SERVER=http://127.0.0.1:9 \
	run export --harbor p@ver_1 "$tmp/out" --project-dir "$tmp/proj"
is_rc 0 "export runs DENV_PYTHON"
out_has "argv: -m denv.interop export harbor p@ver_1 $tmp/out --project-dir $tmp/proj" "with the module and the arguments"
out_has "server: http://127.0.0.1:9 key: dak_k" "and the server and key in its environment"
DENV_PYTHON="$tmp/nopython" run import harbor "$fix/docker-image" -o "$tmp/p3"
is_rc 1 "a missing DENV_PYTHON fails"
err_has "set DENV_PYTHON to a Python 3.11+ that has the denv package" "naming the fix"
done_testing
