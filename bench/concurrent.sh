#!/bin/sh
# concurrent.sh: 50 sandboxes created at once against 50 `docker run -d` at
# once (bench/lib/concurrent.py; CONCURRENT_N overrides 50).
. "$(dirname "$0")/lib/common.sh"
bench_py concurrent
