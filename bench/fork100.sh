#!/bin/sh
# fork100.sh: 100 forks of one version at once on btrfs through the API,
# against 100 `btrfs subvolume snapshot` + `docker run -d` at once
# (bench/lib/fork100.py). Long: only with BENCH_LONG=1; FORK100_N and
# FORK100_MIB override 100 forks and 8 MiB of data.
. "$(dirname "$0")/lib/common.sh"
bench_py fork100
