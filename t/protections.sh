#!/bin/sh
# protections.sh: the protections table (`make protections`, and the end of
# `make check`). Runs t/sidecar/test_protections.py, the five protections
# and Karotte's documented attacks, once per runtime (runc; gvisor when runsc
# is installed) and storage (dir; btrfs on a loop-mounted image when
# btrfs-progs is), then prints one row per check with pass, FAIL or - (not
# run) per column. Exits 1 when a check failed. Needs root and Docker. About 4 minutes.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_root "loop mounts and volumes owned by uid 1000"
suite_need_docker all
tmp=$(mktemp -d "${TMPDIR:-/tmp}/protections.XXXXXX")
dev=
cleanup() {
	# Capped environments' images a killed suite left mounted.
	awk -v t="$tmp/" 'index($2, t) == 1 && $2 != t "mnt" { print $2 }' /proc/mounts | sort -r |
		while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
	if mountpoint -q "$tmp/mnt" 2>/dev/null; then
		umount "$tmp/mnt" 2>/dev/null || umount -l "$tmp/mnt"
	fi
	[ -n "$dev" ] && losetup -d "$dev" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
storages=dir
if command -v mkfs.btrfs >/dev/null 2>&1 && truncate -s 2G "$tmp/btrfs.img" &&
	mkfs.btrfs -q "$tmp/btrfs.img" >/dev/null 2>&1 && dev=$(losetup --find --show "$tmp/btrfs.img" 2>/dev/null) &&
	mkdir "$tmp/mnt" && mount -t btrfs "$dev" "$tmp/mnt" 2>/dev/null; then
	storages="dir btrfs"
fi
runtimes=runc
command -v runsc >/dev/null 2>&1 && runtimes="runc gvisor"
cols=
for rt in $runtimes; do
	for st in $storages; do
		col="$rt/$st"
		cols="$cols $col"
		mkdir -p "$tmp/$rt-$st"
		set --
		[ "$st" = btrfs ] && { mkdir -p "$tmp/mnt/$rt"; set -- --btrfs-root "$tmp/mnt/$rt"; }
		"$py" "$top/t/sidecar/test_protections.py" "$bin" "$tmp/$rt-$st" "$rt" "$st" "$@" \
			>"$tmp/$rt-$st.tap" 2>&1
		sed -n 's/^\(not \)\{0,1\}ok [0-9]* - \([a-z-]*\): .*/\2 \1/p' "$tmp/$rt-$st.tap" |
			awk -v col="$col" '{ print col, $1, ($2 == "not" ? "FAIL" : "pass") }' >>"$tmp/rows"
	done
done
# TAP for prove: one point per cell, then the table as comments.
awk '{ n++; print ($3 == "pass" ? "ok " : "not ok ") n " - " $2 " (" $1 ")" } END { print "1.." n }' "$tmp/rows"
awk -v cols="$cols" '
	{ v[$2 " " $1] = $3; if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
	END {
		nc = split(cols, c, " ")
		line = sprintf("# %-20s", "protection")
		for (j = 1; j <= nc; j++) line = line sprintf(" %-12s", c[j])
		print "#"; print "# denv protections table (t/protections.sh)"; print line
		for (i = 1; i <= n; i++) {
			line = sprintf("# %-20s", order[i])
			for (j = 1; j <= nc; j++) {
				x = v[order[i] " " c[j]]
				line = line sprintf(" %-12s", x == "" ? "-" : x)
			}
			print line
		}
	}' "$tmp/rows"
for f in "$tmp"/*.tap; do
	grep -q '^not ok' "$f" && { echo "# failures in $(basename "$f"):"; grep -A3 '^not ok' "$f" | sed 's/^/#   /' | head -40; }
done
! grep -q ' FAIL$' "$tmp/rows"
