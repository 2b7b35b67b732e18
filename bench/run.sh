#!/bin/sh
# run.sh: `make bench`. Runs every bench/*.sh (each also runnable alone) and
# prints one table: the machine first, then per figure the median of its
# runs, the median of its baseline measured in the same run, the ratio, the
# target from the issue and whether it is met. A figure that cannot be
# measured yet is a "pending: <why>" row. Nothing here asserts a time.
#
#   sh bench/run.sh [NAME...]     only bench/NAME.sh
#
# Environment: BUILD (default build), QUICK=1 (fewer and shorter runs),
# TMPDIR, BENCH_KEEP=1 (keep each script's output and scratch directories),
# BENCH_LONG=1 (also the long rows: bench/fork100.sh, and bench/scale.sh at
# full size, as DENV_BENCH_SCALE=full does), BENCH_SAVE=FILE (the
# run's @ lines, for bench/lib/readme.py to rewrite README's paragraph).
# Progress goes to stderr; each script's free text and stderr go to a log
# directory, named at the end when kept or when a script failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
cd "$top" || exit 1
BUILD=${BUILD:-build}
export BUILD
logs=$(mktemp -d "${TMPDIR:-/tmp}/denv-bench-logs.XXXXXX") || exit 1
keep=${BENCH_KEEP:-}
trap '[ -n "$keep" ] || rm -rf "$logs"' EXIT
trap 'exit 130' INT TERM

# The issue's order first, then anything else found (alphabetical).
order="sandbox exec fork fork100 snapshot verify concurrent batch api memory http store"
list=
for n in $order; do
	[ -f "$here/$n.sh" ] && list="$list $n"
done
for f in "$here"/*.sh; do
	n=$(basename "$f" .sh)
	case " run $list " in *" $n "*) continue ;; esac
	list="$list $n"
done
[ $# -gt 0 ] && list=$*

# Programs the scripts drive that `make bench` does not build itself.
case $BUILD in /*) b=$BUILD ;; *) b=$top/$BUILD ;; esac
if [ ! -x "$b/helpers/http-testserver" ] && [ -f config.mk ]; then
	make -s BUILD="$BUILD" "$BUILD/helpers/http-testserver" >"$logs/make.log" 2>&1 || true
fi

t0=$(date +%s)
for n in $list; do
	f=$here/$n.sh
	if [ ! -f "$f" ]; then
		printf '@note\tbench/%s.sh: no such script\n' "$n" >"$logs/$n.out"
		continue
	fi
	s=$(date +%s)
	printf 'bench: %s.sh ... ' "$n" >&2
	BENCH_RAW=1 sh "$f" >"$logs/$n.out" 2>"$logs/$n.err" </dev/null
	rc=$?
	printf '%ss%s\n' $(($(date +%s) - s)) "$([ $rc = 0 ] || echo " (exit $rc)")" >&2
	if [ $rc != 0 ]; then
		keep=1
		printf '@note\tbench/%s.sh exited %s (log %s/%s.err): %s\n' "$n" "$rc" "$logs" "$n" \
			"$(tail -n 1 "$logs/$n.err" | tr '\t' ' ')" >>"$logs/$n.out"
	fi
done

{
	for n in $list; do
		[ -f "$logs/$n.out" ] || continue
		if grep -q '^@' "$logs/$n.out"; then
			grep '^@' "$logs/$n.out"
		elif [ -s "$logs/$n.out" ]; then
			# A script that prints free text only: shown under the table, verbatim.
			printf '@note\tbench/%s.sh (free text, no figures in the table format):\n' "$n"
			sed 's/^/@note\t  /' "$logs/$n.out"
		fi
	done
	printf '@note\t%s; total %ss%s\n' "$( [ -n "${QUICK:-}" ] && [ "${QUICK:-}" != 0 ] && echo "QUICK=1" || echo "full runs")" \
		$(($(date +%s) - t0)) "$([ -n "$keep" ] && echo "; logs in $logs")"
} | if [ -n "${BENCH_SAVE:-}" ]; then tee "$BENCH_SAVE"; else cat; fi | sh "$here/lib/table.sh" -q
