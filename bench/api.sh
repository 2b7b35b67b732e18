#!/bin/sh
# api.sh: GET /v1/envs/{id} requests/s and p99 with wrk, denv-cp against nginx
# serving the same bytes (bench/lib/api.py).
. "$(dirname "$0")/lib/common.sh"
bench_py api
