#!/bin/sh
# denvd-move.sh: snapshots that move between hosts (t/sidecar/test_move_cp.py):
# the REAL control plane and three real denvd processes with their own data
# dirs; first on the dir backend (a tar stream), then, where a loop device can
# be had, with each host's --btrfs-root on a btrfs image made in this test's
# own temp dir (btrfs send/receive); last on the FAKE zfs of t/fakes/zfs, a
# pool per host (zfs send/receive). The trap unmounts, detaches and removes
# the image on every exit; nothing else is formatted or mounted. TAP.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_bins denvd denv-cp
suite_need_websockets
suite_need_root "volumes owned by other uids"
suite_need_docker all
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denvd-move.XXXXXX")
dev=
trap btrfs_loop_cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$tmp/dir" "$tmp/btrfs" "$tmp/mnt"
rc=0
{ echo "# dir hosts: a tar stream"
  "$py" "$top/t/sidecar/test_move_cp.py" "$top" "$tmp/dir" | sed -e 's/^\(not \)\{0,1\}ok [0-9]* */&tar: /'; } >"$tmp/part1.tap" || rc=1
have_btrfs=yes
for c in mkfs.btrfs btrfs losetup mount umount; do
	command -v $c >/dev/null 2>&1 || have_btrfs=no
done
if [ $have_btrfs = yes ] && truncate -s 3G "$tmp/btrfs.img" && mkfs.btrfs -q "$tmp/btrfs.img" >/dev/null 2>&1 &&
	dev=$(losetup --find --show "$tmp/btrfs.img" 2>/dev/null) && mount -t btrfs "$dev" "$tmp/mnt"; then
	{ echo "# btrfs hosts: btrfs send/receive"
	  "$py" "$top/t/sidecar/test_move_cp.py" "$top" "$tmp/btrfs" --btrfs-base "$tmp/mnt" |
		sed -e 's/^\(not \)\{0,1\}ok [0-9]* */&btrfs: /'; } >"$tmp/part2.tap" || rc=1
else
	echo "# btrfs part skipped: no btrfs-progs or loop device" >"$tmp/part2.tap"
fi
mkdir "$tmp/zfs"
{ echo "# zfs hosts (the fake): zfs send/receive"
  "$py" "$top/t/sidecar/test_move_cp.py" "$top" "$tmp/zfs" --zfs | sed -e 's/^\(not \)\{0,1\}ok [0-9]* */&zfs: /'; } >"$tmp/part3.tap" || rc=1
tap_join "$tmp/part1.tap" "$tmp/part2.tap" "$tmp/part3.tap"
exit $rc
