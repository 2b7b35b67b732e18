#!/bin/sh
# exec.sh: exec round trip through the API, hub and sidecar against `docker
# exec` alone (bench/lib/exec.py). Runnable alone; prints its table.
. "$(dirname "$0")/lib/common.sh"
bench_py exec
