#!/bin/sh
# denvd-snap-zfs.sh: the snapshot/fork/rollback suite (t/sidecar/test_snap.py,
# without the consistency part) on the zfs backend against the FAKE zfs and
# zpool in t/fakes/zfs (no ZFS kernel module here), then a check of the
# command sequence the fake recorded. Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
py=$top/python/.venv/bin/python
bin=$top/bin/denvd
if [ ! -x "$bin" ]; then echo "1..0 # SKIP $bin not built"; exit 0; fi
if [ ! -x "$py" ] || ! "$py" -c 'import websockets' 2>/dev/null; then
	echo "1..0 # SKIP python websockets not installed in $top/python/.venv"; exit 0
fi
if [ "$(id -u)" != 0 ]; then echo "1..0 # SKIP needs root (volumes owned by other uids)"; exit 0; fi
if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "1..0 # SKIP no Docker engine or fixture images (t/docker-up.sh all)"; exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denvd-snap-zfs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/suite"
PATH=$top/t/fakes/zfs:$PATH DENV_FAKE_ZFS=$tmp/zfs DENV_FAKE_ZPOOL=tank SNAP_QUICK=1 \
	"$py" "$top/t/sidecar/test_snap.py" "$bin" "$tmp/suite" zfs --zfs-pool tank
rc=$?
echo "# the command sequence the fake zfs recorded"
"$py" "$top/t/sidecar/check_zfs_calls.py" "$tmp/zfs/calls.log" | sed -e 's/^1\.\./# zfs: 1../' || rc=1
exit $rc
