#!/bin/sh
# denvd-disk.sh: disk caps (x-denv.disk, denvd --disk-limit) on the dir
# backend, the disk-fill attack against them, through denvd and a fake
# control plane (t/sidecar/test_disk.py). Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "loop-mounting each capped environment's image"
command -v mkfs.ext4 >/dev/null 2>&1 || suite_skip "mkfs.ext4 not installed (e2fsprogs)"
suite_need_docker all
suite_tmp denvd-disk
"$py" "$top/t/sidecar/test_disk.py" "$bin" "$tmp"
