#!/bin/sh
# denvd-verify-cp.sh: `denv verify` end to end with the real control plane
# (bin/denv-cp), the CLI and denvd on real Docker (t/sidecar/test_verify_cp.py):
# a refused symlink with --resume, then reward 1 with every phase's evidence,
# the grader's fork destroyed and the agent left frozen. Prints TAP; removes
# its containers, networks and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_bins denvd denv-cp denv
suite_need_websockets
suite_need_root "volumes owned by uid 1000"
suite_need_docker all
suite_tmp denvd-verify-cp
"$py" "$top/t/sidecar/test_verify_cp.py" "$top" "$tmp"
