#!/bin/sh
# denvd-snap-zfs.sh: the snapshot/fork/rollback suite (t/sidecar/test_snap.py,
# without the consistency part) on the zfs backend against the FAKE zfs and
# zpool in t/fakes/zfs (no ZFS kernel module here), then a check of the
# command sequence the fake recorded. Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "volumes owned by other uids"
suite_need_docker all
suite_tmp denvd-snap-zfs
mkdir "$tmp/suite"
PATH=$top/t/fakes/zfs:$PATH DENV_FAKE_ZFS=$tmp/zfs DENV_FAKE_ZPOOL=tank SNAP_QUICK=1 \
	"$py" "$top/t/sidecar/test_snap.py" "$bin" "$tmp/suite" zfs --zfs-pool tank >"$tmp/part1.tap"
rc=$?
{ echo "# the command sequence the fake zfs recorded"
  "$py" "$top/t/sidecar/check_zfs_calls.py" "$tmp/zfs/calls.log"; } >"$tmp/part2.tap" || rc=1
tap_join "$tmp/part1.tap" "$tmp/part2.tap"
exit $rc
