#!/bin/sh
# cp-tokens.sh: denv-cp checks a cloud's token with its provider at connect
# (POST /v1/clouds, POST /v1/targets/connect, denv cloud connect), against the
# fakes of Hetzner, E2B and Daytona; t/cp/test_tokens.py prints the TAP.
# Loopback only.
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
if [ ! -x "$top/bin/denv-cp" ]; then
	echo "1..0 # SKIP bin/denv-cp is not built"
	exit 0
fi
if [ ! -x "$py" ]; then
	echo "1..0 # SKIP python/.venv is not set up"
	exit 0
fi
DENV_TOP="$top" exec "$py" "$top/t/cp/test_tokens.py"
