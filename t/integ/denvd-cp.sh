#!/bin/sh
# denvd-cp.sh: denvd with the real control plane (bin/denv-cp): join, the
# quickstart world, exec, psql, files, destroy (t/sidecar/test_with_cp.py).
# Prints TAP; removes its containers, network and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_bins denvd denv-cp
suite_need_root "volumes owned by uid 1000"
suite_need_docker all
suite_tmp denvd-cp
"$py" "$top/t/sidecar/test_with_cp.py" "$top" "$tmp"
