#!/bin/sh
# store.sh: store figures: commits/s (batched and unbatched fsync), replay time
# and peak RSS for one million rows, compaction time. Prints; asserts nothing.
# The data goes to a scratch directory on the disk (fsync figures mean
# nothing on tmpfs); STORE_BENCH_DIR overrides it, STORE_BENCH_ROWS the rows.
set -u
build=${BUILD:-build}
bin=$build/bench/store-bench
rows=${STORE_BENCH_ROWS:-1000000}
[ -x "$bin" ] || { echo "store.sh: $bin not built (make BUILD=$build $bin)"; exit 1; }
base=${STORE_BENCH_DIR:-${TMPDIR:-/var/tmp}}
work=$(mktemp -d "$base/denv-store-bench.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT INT TERM
echo "== store bench in $work ($(df -P "$work" | awk 'NR==2 {print $1}'))"
"$bin" commit "$work/commit" 20000
"$bin" load "$work/big" "$rows"
"$bin" replay "$work/big"
"$bin" compact "$work/big"
"$bin" replay "$work/big"
