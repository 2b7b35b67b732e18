#!/bin/sh
# cp-api.sh: denv-cp's REST API end to end (t/cp/test_api.py prints the TAP).
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
[ -x "$py" ] || py=python3
if [ ! -x "$top/bin/denv-cp" ]; then
	echo "1..0 # SKIP bin/denv-cp is not built"
	exit 0
fi
DENV_TOP="$top" exec "$py" "$top/t/cp/test_api.py"
