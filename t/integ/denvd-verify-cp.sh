#!/bin/sh
# denvd-verify-cp.sh: `denv verify` end to end with the real control plane
# (bin/denv-cp), the CLI and denvd on real Docker (t/sidecar/test_verify_cp.py):
# a refused symlink with --resume, then reward 1 with every phase's evidence,
# the grader's fork destroyed and the agent left frozen. Prints TAP; removes
# its containers, networks and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
py=$top/python/.venv/bin/python
for b in denvd denv-cp denv; do
	if [ ! -x "$top/bin/$b" ]; then echo "1..0 # SKIP $top/bin/$b not built"; exit 0; fi
done
if [ ! -x "$py" ] || ! "$py" -c 'import websockets' 2>/dev/null; then
	echo "1..0 # SKIP python websockets not installed in $top/python/.venv"; exit 0
fi
if [ "$(id -u)" != 0 ]; then echo "1..0 # SKIP needs root (volumes owned by uid 1000)"; exit 0; fi
if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "1..0 # SKIP no Docker engine or fixture images (t/docker-up.sh all)"; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denvd-verify-cp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
"$py" "$top/t/sidecar/test_verify_cp.py" "$top" "$tmp"
