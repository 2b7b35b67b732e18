#!/bin/sh
# denvd-restart.sh: kill denvd mid-command and start it again; the command is
# answered once, never run twice (t/sidecar/test_restart.py). Prints TAP.
# Removes its containers, network and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "volumes owned by uid 1000"
suite_need_docker busybox "no Docker engine or fixture images (t/docker-up.sh)"
suite_tmp denvd-restart
"$py" "$top/t/sidecar/test_restart.py" "$bin" "$tmp"
