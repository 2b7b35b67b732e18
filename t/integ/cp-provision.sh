#!/bin/sh
# cp-provision.sh: denv-cp's provision and join phases against a fake Hetzner
# Cloud API (t/fakes/hetzner.py) and the scripted sidecar; t/cp/test_provision.py
# prints the TAP (it needs the websockets module). Loopback only.
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
DENV_TOP="$top" exec "$py" "$top/t/cp/test_provision.py"
