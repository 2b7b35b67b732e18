#!/bin/sh
# denvd-snap-cp.sh: snapshot, fork and rollback deployments through the REAL
# control plane (bin/denv-cp) and denvd on real Docker (t/sidecar/test_snap_cp.py). TAP.
# Removes its containers, networks and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
py=$top/python/.venv/bin/python
bin=$top/bin/denvd
if [ ! -x "$bin" ]; then echo "1..0 # SKIP $bin not built"; exit 0; fi
if [ ! -x "$top/bin/denv-cp" ]; then echo "1..0 # SKIP $top/bin/denv-cp not built"; exit 0; fi
if [ ! -x "$py" ] || ! "$py" -c 'import websockets' 2>/dev/null; then
	echo "1..0 # SKIP python websockets not installed in $top/python/.venv"; exit 0
fi
if [ "$(id -u)" != 0 ]; then echo "1..0 # SKIP needs root (volumes owned by other uids)"; exit 0; fi
if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "1..0 # SKIP no Docker engine or fixture images (t/docker-up.sh all)"; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denvd-snap-cp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
"$py" "$top/t/sidecar/test_snap_cp.py" "$top" "$tmp"
