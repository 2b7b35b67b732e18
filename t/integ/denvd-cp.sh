#!/bin/sh
# denvd-cp.sh: denvd with the real control plane (bin/denv-cp): join, the
# quickstart world, exec, psql, files, destroy (t/sidecar/test_with_cp.py).
# Prints TAP; removes its containers, network and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
py=$top/python/.venv/bin/python
for b in denvd denv-cp; do
	if [ ! -x "$top/bin/$b" ]; then echo "1..0 # SKIP $top/bin/$b not built"; exit 0; fi
done
if [ "$(id -u)" != 0 ]; then echo "1..0 # SKIP needs root (volumes owned by uid 1000)"; exit 0; fi
if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "1..0 # SKIP no Docker engine or fixture images (t/docker-up.sh all)"; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denvd-cp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
"$py" "$top/t/sidecar/test_with_cp.py" "$top" "$tmp"
