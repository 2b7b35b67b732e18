#!/bin/sh
# scale.sh: one denv-cp with many simulated sidecars and many environments,
# file store and PostgreSQL: RSS, GET /v1/envs/{id} and exec round-trip
# p50/p99, start-up replay (bench/lib/scale.py; simulated sidecars in
# bench/lib/fleet.py). Default 100 hosts x 10,000 environments (under a
# minute); DENV_BENCH_SCALE=full (or BENCH_LONG=1) runs the issue's
# 1,000 x 100,000 (5 to 9 minutes here); SCALE_HOSTS, SCALE_ENVS and
# SCALE_BACKENDS ("file pg") override.
. "$(dirname "$0")/lib/common.sh"
bench_py scale
