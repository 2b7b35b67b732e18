#!/bin/sh
# denvd-snap-btrfs.sh: the snapshot/fork/rollback suite (t/sidecar/test_snap.py)
# and the real-control-plane deployments (test_snap_cp.py) on the btrfs
# backend. The filesystem is an image FILE made in this test's own temp dir,
# attached to a loop device and mounted on a directory in that temp dir; the
# trap unmounts, detaches and removes it on every exit. Nothing else is ever
# formatted or mounted. Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "loop mount"
for c in mkfs.btrfs btrfs losetup mount umount; do
	command -v $c >/dev/null 2>&1 || suite_skip "$c not installed (btrfs-progs)"
done
suite_need_docker all
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denvd-snap-btrfs.XXXXXX")
dev=
trap btrfs_loop_cleanup EXIT
trap 'exit 1' INT TERM
truncate -s 2G "$tmp/btrfs.img"
mkfs.btrfs -q "$tmp/btrfs.img" >/dev/null 2>&1 || { echo "1..0 # SKIP mkfs.btrfs failed on an image file"; exit 0; }
dev=$(losetup --find --show "$tmp/btrfs.img" 2>/dev/null) || { dev=; echo "1..0 # SKIP no loop device"; exit 0; }
mkdir "$tmp/mnt" "$tmp/suite" "$tmp/cp"
mount -t btrfs "$dev" "$tmp/mnt" || { echo "1..0 # SKIP cannot mount the loop device"; exit 0; }
mkdir "$tmp/mnt/denv" "$tmp/mnt/denv-cp"
rc=0
"$py" "$top/t/sidecar/test_snap.py" "$bin" "$tmp/suite" btrfs --btrfs-root "$tmp/mnt/denv" >"$tmp/part1.tap" || rc=1
{ echo "# the same through the real control plane"
  "$py" "$top/t/sidecar/test_snap_cp.py" "$top" "$tmp/cp" --btrfs-root "$tmp/mnt/denv-cp" | sed -e 's/^\(not \)\{0,1\}ok [0-9]* */&cp: /'; } >"$tmp/part2.tap" || rc=1
tap_join "$tmp/part1.tap" "$tmp/part2.tap"
exit $rc
