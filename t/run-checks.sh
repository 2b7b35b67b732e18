#!/bin/sh
# run-checks.sh BUILD: run every test suite that `make check` covers and print
# one closing summary line. Suites: unit tests, the same under ASan+UBSan, the
# fuzz seed corpora replayed under ASan+UBSan, and integration tests.
set -u
build=${1:-build}
top=$(pwd)
failed=
summary=

export DENV_TOP="$top" DENV_BUILD="$top/$build"
export PATH="$top/bin:$top/python/.venv/bin:$PATH"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# run_prove NAME JOBS FILES...: prove the files, note pass/fail and counts.
run_prove() {
	name=$1
	jobs=$2
	shift 2
	[ $# -gt 0 ] || return 0
	echo "== $name"
	out=$(mktemp)
	# shellcheck disable=SC2086
	if prove -j"$jobs" ${prove_flags:-} "$@" >"$out" 2>&1; then status=ok; else status=FAIL; failed="$failed $name"; fi
	cat "$out"
	# prove hides diagnostics: show what each failing file said about its failures.
	for f in $(sed -n 's/^\([^ ]*\) *(Wstat: .*/\1/p' "$out"); do
		echo "-- $f (rerun, failures only):"
		"$f" 2>&1 | awk '/^not ok/ {show=1; print; next} /^(ok|not ok|[0-9]+\.\.)/ {show=0} show' | head -n 60
	done
	counts=$(sed -n 's/^Files=\([0-9]*\), Tests=\([0-9]*\).*/\1 files, \2 tests/p' "$out")
	summary="$summary; $name $status ($counts)"
	rm -f "$out"
}

echo "== lint"
if sh t/lint.sh; then summary="lint ok"; else failed="$failed lint"; summary="lint FAIL"; fi

run_prove unit 2 "$build"/t/*
run_prove asan 2 "$build"/t-asan/*

echo "== fuzz corpus replay"
n=0
for bin in "$build"/replay/*; do
	[ -x "$bin" ] || continue
	target=$(basename "$bin")
	corpus=fuzz/corpus/$target
	[ -d "$corpus" ] || { echo "no seed corpus $corpus"; failed="$failed replay:$target"; continue; }
	if "$bin" "$corpus"; then n=$((n + 1)); else failed="$failed replay:$target"; fi
done
summary="$summary; replay $n targets"

# One at a time: on two cores, Docker-heavy suites side by side turn timeouts
# into flakes, and a slower green run is worth more than a faster flaky one.
# --timer: each file's time, to see what the suite's time goes to.
# --failures --comments: a failure that does not come back on the rerun
# (a flake) still shows its not-ok line and the diagnostics under it.
prove_flags="--failures --comments --timer" run_prove integration 1 $(ls t/integ/*.sh 2>/dev/null)

# Last, so that it is what a reader sees: the protections table.
echo "== protections"
pt=$(mktemp)
if sh t/protections.sh >"$pt" 2>&1; then pstatus=ok; else pstatus=FAIL; failed="$failed protections"; fi
grep '^#' "$pt"
summary="$summary; protections $pstatus ($(grep -c '^ok' "$pt") of $(grep -c '^\(not \)\{0,1\}ok' "$pt") cells pass)"
rm -f "$pt"

summary=${summary#; }
if [ -n "$failed" ]; then
	echo "make check: FAILED:$failed ($summary)"
	exit 1
fi
echo "make check: all passed ($summary)"
