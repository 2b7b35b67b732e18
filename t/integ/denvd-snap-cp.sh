#!/bin/sh
# denvd-snap-cp.sh: snapshot, fork and rollback deployments through the REAL
# control plane (bin/denv-cp) and denvd on real Docker (t/sidecar/test_snap_cp.py). TAP.
# Removes its containers, networks and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_bins denvd denv-cp
suite_need_websockets
suite_need_root "volumes owned by other uids"
suite_need_docker all
suite_tmp denvd-snap-cp
"$py" "$top/t/sidecar/test_snap_cp.py" "$top" "$tmp"
