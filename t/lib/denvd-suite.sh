# denvd-suite.sh: the start of an integration script (t/integ/denvd-*.sh
# running a Python suite from t/sidecar/, and others that need the same
# checks). Each suite_need_* prints the TAP skip line and exits
# when something the suite needs is missing here; suite_tmp makes the run's
# temp dir. (t/lib/stack.sh is something else: a running cp + denvd for tests.)
#   needs: $top (repository root)
#   sets:  py (the venv's python); suite_tmp sets tmp

py=$top/python/.venv/bin/python

suite_skip() {
	echo "1..0 # SKIP $*"
	exit 0
}

# suite_need_bins NAME...: each $top/bin/NAME is built.
suite_need_bins() {
	for b in "$@"; do
		[ -x "$top/bin/$b" ] || suite_skip "$top/bin/$b not built"
	done
}

# suite_need_websockets: the venv's python has websockets (the fake control planes use it).
suite_need_websockets() {
	if [ ! -x "$py" ] || ! "$py" -c 'import websockets' 2>/dev/null; then
		suite_skip "python websockets not installed in $top/python/.venv"
	fi
}

# suite_need_denvd: $top/bin/denvd is built (bin names it) and the fake
# control planes can run (websockets).
suite_need_denvd() {
	bin=$top/bin/denvd
	suite_need_bins denvd
	suite_need_websockets
}

# suite_need_root WHY: running as root; WHY says what for.
suite_need_root() {
	[ "$(id -u)" = 0 ] || suite_skip "needs root ($1)"
}

# suite_need_docker all|busybox [MESSAGE]: t/docker-up.sh brings up Docker
# and those images; else skip with MESSAGE (by default, one that fits the set).
suite_need_docker() {
	sh "$top/t/docker-up.sh" "$1" >/dev/null 2>&1 && return 0
	if [ "$1" = all ]; then
		suite_skip "${2:-no Docker engine or fixture images (t/docker-up.sh all)}"
	fi
	suite_skip "${2:-no Docker engine (t/docker-up.sh)}"
}

# suite_tmp NAME: tmp, a fresh temp dir named after NAME, removed on exit.
suite_tmp() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT INT TERM
}

# tap_join FILE...: several TAP streams as one: test points renumbered in
# order, each stream's own plan kept as a comment and checked (a stream that
# ran fewer or more points than it planned adds a failing point), one plan
# at the end.
tap_join() {
	awk '
		function close_part() {
			if (part != "" && planned >= 0 && seen != planned) {
				n++
				print "not ok " n " - " part ": planned " planned " test points, ran " seen
			}
		}
		FNR == 1 { close_part(); part = FILENAME; planned = -1; seen = 0 }
		/^1\.\.[0-9]+/ { planned = substr($1, 4) + 0; print "# (part plan " $0 ")"; next }
		/^(not )?ok( |$)/ {
			n++; seen++
			neg = ($1 == "not")
			sub(/^(not )?ok( [0-9]+)?/, "")
			print (neg ? "not ok " : "ok ") n $0
			next
		}
		{ print }
		END { close_part(); print "1.." n }
	' "$@"
}

# btrfs_loop_cleanup: what a btrfs-on-a-loop-image suite's EXIT trap does:
# unmount $tmp/mnt (retrying, then lazily), detach $dev, remove $tmp.
btrfs_loop_cleanup() {
	if mountpoint -q "$tmp/mnt" 2>/dev/null; then
		umount "$tmp/mnt" 2>/dev/null || { sleep 1; umount "$tmp/mnt" 2>/dev/null; } || umount -l "$tmp/mnt"
	fi
	[ -n "$dev" ] && losetup -d "$dev" 2>/dev/null
	rm -rf "$tmp"
}
