#!/bin/sh
# denvd-verify.sh: verify.collect and verify.run on real Docker through denvd and a fake
# control plane (t/sidecar/test_verify.py): rewards, the seven refusals, the
# frozen agent, a service verifier, the timeout. Prints TAP. Removes its containers,
# network and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "volumes owned by uid 1000"
suite_need_docker all
suite_tmp denvd-verify
"$py" "$top/t/sidecar/test_verify.py" "$bin" "$tmp"
