#!/bin/sh
# exec-stream.sh: first byte of a streamed `denv exec` against `docker exec`
# alone (bench/lib/exec_stream.py). Runnable alone; prints its table.
. "$(dirname "$0")/lib/common.sh"
bench_py exec_stream
