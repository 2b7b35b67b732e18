#!/bin/sh
# table.sh: read benchmark output (the @ lines of bench/lib/benchlib.py among
# free text) on stdin; print the machine line and one table: per figure the
# median of its runs, the baseline's median from the same run, the ratio, the
# target and whether it is met. Free text is passed through first, unless -q.
#   table.sh [-q]
set -u
quiet=0
[ "${1:-}" = -q ] && quiet=1

machine() {
	cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc)
	model=$(sed -n 's/^model name[^:]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
	mem=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)
	dir=${TMPDIR:-/tmp}
	set -- $(df -PT "$dir" 2>/dev/null | awk 'NR == 2 { print $1, $2, $3 }')
	dev=${1:-?} fs=${2:-?} size=${3:-0}
	kind=
	b=$(basename "$dev")
	while [ -n "$b" ] && [ ! -e "/sys/class/block/$b/queue/rotational" ] && [ -e "/sys/class/block/$b/.." ]; do
		p=$(basename "$(readlink -f "/sys/class/block/$b/..")")
		[ "$p" = "$b" ] || [ "$p" = block ] && break
		b=$p
	done
	if [ -r "/sys/class/block/$b/queue/rotational" ]; then
		case $(cat "/sys/class/block/$b/queue/rotational") in 0) kind=", non-rotational" ;; 1) kind=", rotational per the kernel" ;; esac
	fi
	size=$(awk -v k="$size" 'BEGIN { printf "%.0f GiB", k / 1048576 }')
	dk=$(timeout 10 docker info --format '{{.ServerVersion}} {{.Driver}} {{.DockerRootDir}}' 2>/dev/null)
	if [ -n "$dk" ]; then
		set -- $dk
		dfs=$(df -PT "$3" 2>/dev/null | awk 'NR == 2 { print $2 }')
		dk="docker $1 $2 on ${dfs:-?}"
	else
		dk="docker: not answering"
	fi
	echo "machine: $cores cores${model:+ ($model)}, $mem memory, storage: $dir on $dev ($fs, $size$kind), $dk, kernel $(uname -r)"
}

awk -F '\t' -v quiet="$quiet" -v machine="$(machine)" '
function fmt(v, unit) {
	if (v == "") return "-"
	if (unit == "req/s") return sprintf("%.0f %s", v, unit)
	if (v >= 100 || v <= -100) return sprintf("%.0f %s", v, unit)
	if (v >= 10 || v <= -10) return sprintf("%.1f %s", v, unit)
	return sprintf("%.2f %s", v, unit)
}
function median(arr, key, n,    i, j, t, a) {
	if (n == 0) return ""
	for (i = 1; i <= n; i++) a[i] = arr[key, i] + 0
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
	if (n % 2) return a[(n + 1) / 2]
	return (a[n / 2] + a[n / 2 + 1]) / 2
}
$1 == "@fig" {
	if (!($2 in label)) order[++nf] = $2
	label[$2] = $3; blabel[$2] = $4; unit[$2] = $5; target[$2] = $6
	next
}
$1 == "@s" { ns[$2]++; s[$2, ns[$2]] = $3; next }
$1 == "@b" { nb[$2]++; b[$2, nb[$2]] = $3; next }
$1 == "@pending" { pend[$2] = $3; if (!($2 in label)) { order[++nf] = $2; label[$2] = $2; unit[$2] = ""; target[$2] = "report"; blabel[$2] = "-" } next }
$1 == "@note" { notes[++nn] = $2; next }
{ if (!quiet) { print; fflush() } next }
END {
	print machine
	printf "%-52s %4s %16s %16s  %-30s %7s %9s  %s\n", "figure", "runs", "denv", "baseline", "(baseline is)", "ratio", "target", "met"
	for (i = 1; i <= nf; i++) {
		k = order[i]; u = unit[k]; t = target[k]
		m = median(s, k, ns[k] + 0); bm = median(b, k, nb[k] + 0)
		ratio = ""
		if (m != "" && bm != "" && bm + 0 != 0) ratio = m / bm
		tshow = t
		if (t ~ /^ratio<=/) tshow = "<=" substr(t, 8) "x"
		else if (t ~ /^ratio>=/) tshow = ">=" substr(t, 8) "x"
		else if (t ~ /^[<>]/) tshow = t " " u
		else tshow = "-"
		met = "-"
		if (t ~ /^ratio<=/ && ratio != "") met = (ratio <= substr(t, 8) + 0) ? "yes" : "NO"
		else if (t ~ /^ratio>=/ && ratio != "") met = (ratio >= substr(t, 8) + 0) ? "yes" : "NO"
		else if (t ~ /^</ && m != "") met = (m < substr(t, 2) + 0) ? "yes" : "NO"
		else if (t ~ /^>/ && m != "") met = (m > substr(t, 2) + 0) ? "yes" : "NO"
		else if (t == "report" && m != "") met = "reported"
		if (k in pend) { met = "pending: " pend[k]; m = "" }
		else if (m == "") met = "no runs"
		runs = ns[k] + 0
		if (nb[k] + 0 != runs && nb[k] + 0 > 0) runs = runs "/" nb[k]
		printf "%-52s %4s %16s %16s  %-30s %7s %9s  %s\n", label[k], (k in pend) ? "-" : runs, (k in pend) ? "-" : fmt(m, u), fmt(bm, u),
			(bm == "" ? "" : blabel[k]), ratio == "" ? "-" : sprintf("%.2fx", ratio), tshow, met
	}
	for (i = 1; i <= nn; i++) print "note: " notes[i]
}
'
