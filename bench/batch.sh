#!/bin/sh
# batch.sh: a batch of 20 sandboxes and a batch of 100 forks of one version
# (20 with QUICK=1), each against as many parallel single calls
# (bench/lib/batch.py). Runnable alone; prints its table.
. "$(dirname "$0")/lib/common.sh"
bench_py batch
