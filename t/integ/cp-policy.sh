#!/bin/sh
# cp-policy.sh: per-team quotas and Idempotency-Key on denv-cp with a scripted
# sidecar (t/cp/test_policy.py prints the TAP; it needs the websockets module).
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
if [ ! -x "$top/bin/denv-cp" ]; then
	echo "1..0 # SKIP bin/denv-cp is not built"
	exit 0
fi
if [ ! -x "$py" ] || ! "$py" -c 'import websockets' 2>/dev/null; then
	echo "1..0 # SKIP python/.venv with websockets is not set up"
	exit 0
fi
DENV_TOP="$top" exec "$py" "$top/t/cp/test_policy.py"
