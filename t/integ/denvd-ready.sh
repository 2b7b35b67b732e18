#!/bin/sh
# denvd-ready.sh: denvd's own readiness tests (PostgreSQL's startup packet,
# Redis PING, a healthcheck through exec, running) on real Docker through
# the fake control plane (t/sidecar/test_ready.py). Prints TAP. Removes its
# containers, network and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "entering containers' network namespaces"
suite_need_docker all
suite_tmp denvd-ready
"$py" "$top/t/sidecar/test_ready.py" "$bin" "$tmp"
