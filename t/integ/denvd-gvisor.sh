#!/bin/sh
# denvd-gvisor.sh: x-denv.runtime gvisor on real Docker through denvd and a
# fake control plane (t/sidecar/test_gvisor.py). Needs runsc (t/deps.sh
# installs it); denvd registers it with Docker at start. Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "registering runsc with dockerd, volumes owned by uid 1000"
command -v runsc >/dev/null 2>&1 || suite_skip "runsc not installed (apt-get install runsc)"
suite_need_docker all
suite_tmp denvd-gvisor
"$py" "$top/t/sidecar/test_gvisor.py" "$bin" "$tmp"
