# common.sh: sourced by every bench/*.sh (POSIX sh).
#
# Run alone (`sh bench/x.sh`), a script runs itself again with BENCH_RAW=1
# and pipes what it prints through bench/lib/table.sh, so that it ends with
# the same table `make bench` prints (its free text goes to stderr). Under
# bench/run.sh (BENCH_RAW=1 already) it prints the raw @ lines that run.sh
# gathers; the line protocol is described in bench/lib/benchlib.py.
#
# Environment: BUILD (default build; relative to the top of the tree), QUICK=1
# (fewer runs), TMPDIR (where scratch directories go), BENCH_KEEP=1 (keep them).
set -u
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$BENCH_DIR/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$TOP/$BUILD ;; esac
DENV_TOP=$TOP
export BUILD DENV_TOP
if [ -z "${BENCH_RAW:-}" ]; then
	BENCH_RAW=1 sh "$0" "$@" | sh "$BENCH_DIR/lib/table.sh"
	exit 0
fi

# bench_py NAME: run bench/lib/NAME.py with benchlib on the path.
bench_py() {
	PYTHONPATH=$BENCH_DIR/lib${PYTHONPATH:+:$PYTHONPATH} exec python3 "$BENCH_DIR/lib/$1.py"
}

# Emitters for shell benchmarks (same protocol as benchlib.py).
tab=$(printf '\t')
fig() { printf '@fig\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5"; }
sample() { printf '@s\t%s\t%s\n' "$1" "$2"; }
base() { printf '@b\t%s\t%s\n' "$1" "$2"; }
pending() { printf '@pending\t%s\t%s\n' "$1" "$2"; }
note() { printf '@note\t%s\n' "$1"; }
quick() { [ -n "${QUICK:-}" ] && [ "${QUICK:-}" != 0 ]; }
