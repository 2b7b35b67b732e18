#!/bin/sh
# python-unit.sh: the Python package's unit tests (python/tests/test_*.py) against
# a local fake of the REST API; the real Harbor, Inspect and OpenEnv runs in them
# need Docker and the fixture images and are skipped (with the reason) without.
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
if [ ! -x "$py" ]; then
	echo "1..0 # SKIP python/.venv is missing (t/deps.sh makes it)"
	exit 0
fi
# This checkout's package, whichever checkout the venv was installed from.
PYTHONPATH="$top/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
if ! "$py" -c 'import denv, harbor, inspect_ai, openenv' >/dev/null 2>&1; then
	echo "1..0 # SKIP python/.venv lacks a framework (t/deps.sh installs them)"
	exit 0
fi
cd "$top/python/tests" || exit 1
exec "$py" tap.py test_client test_context test_packaging test_harbor test_inspect test_openenv test_realcp test_conformance_self test_verifiers test_interop test_karotte test_hud
