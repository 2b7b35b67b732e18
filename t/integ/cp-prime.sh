#!/bin/sh
# cp-prime.sh: a sandbox on a Prime Intellect target through denv-cp's API (the driver in
# src/cp/driver_prime.c) against the fake t/fakes/fake_prime.py, whose sandboxes
# are Docker containers; t/cp/test_prime.py prints the TAP. Loopback only.
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
DENV_TOP="$top" exec "$py" "$top/t/cp/test_prime.py"
