#!/bin/sh
# denvd-env.sh: the quickstart world on real Docker through denvd and a fake
# control plane (t/sidecar/test_env.py). Prints TAP. Removes its containers,
# network and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "volumes owned by uid 1000"
suite_need_docker all
suite_tmp denvd-env
"$py" "$top/t/sidecar/test_env.py" "$bin" "$tmp"
