#!/bin/sh
# fakes-sdk-prime.sh: the Prime Intellect fake t/fakes/fake_prime.py is accepted
# by Prime's own client, prime-sandboxes (t/fakes/test_sdk_prime.py prints the
# TAP). Loopback only.
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
if [ ! -x "$py" ]; then
	echo "1..0 # SKIP python/.venv is missing (t/deps.sh makes it)"
	exit 0
fi
exec "$py" "$top/t/fakes/test_sdk_prime.py"
