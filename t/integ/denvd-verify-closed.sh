#!/bin/sh
# denvd-verify-closed.sh: verify fails closed (t/sidecar/test_verify_closed.py)
# with the real control plane and denvd on real Docker: a limit tripping
# in the middle of the collect list (exact, stable `missing`, no grader
# fork), 258 nested directories in a volume, and a full disk each score 0
# with the reason in `refused`, the agent left frozen. The disk is a small
# ext4 image FILE made in this test's own temp dir, loop-mounted as the data
# directory; the trap unmounts, detaches and removes it on every exit.
# Nothing else is formatted or mounted. Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_bins denvd denv-cp denv
suite_need_websockets
suite_need_root "volumes owned by uid 1000; a loop mount"
suite_need_docker all
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denvd-verify-closed.XXXXXX")
dev=
cleanup() {
	if mountpoint -q "$tmp/fill/data" 2>/dev/null; then
		umount "$tmp/fill/data" 2>/dev/null || { sleep 1; umount "$tmp/fill/data" 2>/dev/null; } ||
			umount -l "$tmp/fill/data"
	fi
	[ -n "$dev" ] && losetup -d "$dev" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$tmp/attacks" "$tmp/fill"
rc=0
"$py" "$top/t/sidecar/test_verify_closed.py" "$top" "$tmp/attacks" attacks >"$tmp/part1.tap" || rc=1
# 64 MiB: the agent (uid 1000) fills it up to ext4's reserve for root, and
# a copy of its volume does not fit in what is left.
part2() {
	for c in mkfs.ext4 losetup mount umount; do
		command -v $c >/dev/null 2>&1 || { echo "1..0 # SKIP $c not installed"; return 0; }
	done
	truncate -s 64M "$tmp/fill.img"
	mkfs.ext4 -q -F "$tmp/fill.img" >/dev/null 2>&1 || { echo "1..0 # SKIP mkfs.ext4 failed on an image file"; return 0; }
	dev=$(losetup --find --show "$tmp/fill.img" 2>/dev/null) || { dev=; echo "1..0 # SKIP no loop device"; return 0; }
	mkdir "$tmp/fill/data"
	mount -t ext4 "$dev" "$tmp/fill/data" || { echo "1..0 # SKIP cannot mount the loop device"; return 0; }
	echo "# disk fill: the data directory is a 64 MiB ext4 image"
	"$py" "$top/t/sidecar/test_verify_closed.py" "$top" "$tmp/fill" diskfill
}
part2 >"$tmp/part2.tap" || rc=1
tap_join "$tmp/part1.tap" "$tmp/part2.tap"
exit $rc
