#!/bin/sh
# denvd-snap.sh: snapshot, fork and rollback on the dir backend, on real
# Docker with PostgreSQL and Redis (t/sidecar/test_snap.py). Prints TAP.
# Removes its containers, networks and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "volumes owned by other uids"
suite_need_docker all
suite_tmp denvd-snap
"$py" "$top/t/sidecar/test_snap.py" "$bin" "$tmp" dir
