#!/bin/sh
# denvd-snap-freeze.sh: the snapshot's freeze through the cgroup freezer on
# real Docker (t/sidecar/test_snap_freeze.py): containers thawed after every
# snapshot, and a snapshot worker killed inside its frozen window leaves
# nothing frozen once the next command for the env (or denvd's start) comes.
# Prints TAP. Removes its containers, networks and data even on failure.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "the cgroup freezer and volumes owned by other uids"
suite_need_docker busybox
suite_tmp denvd-snap-freeze
"$py" "$top/t/sidecar/test_snap_freeze.py" "$bin" "$tmp"
