#!/bin/sh
# denvd-session.sh: denvd's session, command log and install verb against a
# fake control plane (t/sidecar/fakecp.py). Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
py=$top/python/.venv/bin/python
bin=$top/bin/denvd
if [ ! -x "$bin" ]; then echo "1..0 # SKIP $bin not built"; exit 0; fi
if [ ! -x "$py" ] || ! "$py" -c 'import websockets' 2>/dev/null; then
	echo "1..0 # SKIP python websockets not installed in $top/python/.venv"; exit 0
fi
if ! sh "$top/t/docker-up.sh" busybox >/dev/null 2>&1; then
	echo "1..0 # SKIP no Docker engine (t/docker-up.sh)"; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denvd-session.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
"$py" "$top/t/sidecar/test_session.py" "$bin" "$tmp"
