#!/bin/sh
# fakes-sdk.sh: the provider fakes under t/fakes/ are accepted by the
# providers' own SDKs (t/fakes/test_sdks.py prints the TAP). Loopback only.
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
if [ ! -x "$py" ]; then
	echo "1..0 # SKIP python/.venv is missing (t/deps.sh makes it)"
	exit 0
fi
exec "$py" "$top/t/fakes/test_sdks.py"
