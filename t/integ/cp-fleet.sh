#!/bin/sh
# cp-fleet.sh: the scale benchmark's simulated sidecars (bench/lib/fleet.py)
# against a real denv-cp. t/cp/test_fleet.py prints the TAP, and skips when
# bin/denv-cp or the websockets module is missing.
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
[ -x "$py" ] || { echo "1..0 # SKIP python/.venv is not set up"; exit 0; }
DENV_TOP="$top" exec "$py" "$top/t/cp/test_fleet.py"
