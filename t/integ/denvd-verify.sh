#!/bin/sh
# denvd-verify.sh: verify.collect and verify.run on real Docker through denvd and a fake
# control plane (t/sidecar/test_verify.py): rewards, the seven refusals, the
# frozen agent, a service verifier, the timeout. Prints TAP. Removes its containers,
# network and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
py=$top/python/.venv/bin/python
bin=$top/bin/denvd
if [ ! -x "$bin" ]; then echo "1..0 # SKIP $bin not built"; exit 0; fi
if [ ! -x "$py" ] || ! "$py" -c 'import websockets' 2>/dev/null; then
	echo "1..0 # SKIP python websockets not installed in $top/python/.venv"; exit 0
fi
if [ "$(id -u)" != 0 ]; then echo "1..0 # SKIP needs root (volumes owned by uid 1000)"; exit 0; fi
if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "1..0 # SKIP no Docker engine or fixture images (t/docker-up.sh all)"; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denvd-verify.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
"$py" "$top/t/sidecar/test_verify.py" "$bin" "$tmp"
