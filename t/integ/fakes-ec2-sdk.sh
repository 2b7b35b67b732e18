#!/bin/sh
# fakes-ec2-sdk.sh: the fake EC2 Query API (t/fakes/ec2.py) is accepted by
# boto3 making denv-cp's calls (t/fakes/test_sdk_ec2.py prints the TAP). Loopback only.
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
if [ ! -x "$py" ]; then
	echo "1..0 # SKIP python/.venv is missing (t/deps.sh makes it)"
	exit 0
fi
exec "$py" "$top/t/fakes/test_sdk_ec2.py"
