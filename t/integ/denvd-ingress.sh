#!/bin/sh
# denvd-ingress.sh: endpoints of egress-denied environments through denvd's
# own ingress proxy, on real Docker (t/sidecar/test_ingress.py). Prints TAP.
# Removes its containers, networks, proxy processes and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "setns into a container's network namespace"
suite_need_docker all "no Docker engine or fixture images (t/docker-up.sh all)"
suite_tmp denvd-ingress
"$py" "$top/t/sidecar/test_ingress.py" "$bin" "$tmp"
