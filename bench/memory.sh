#!/bin/sh
# memory.sh: denv-cp RSS with 10,000 environments in its store, and denvd's
# idle RSS (bench/lib/memory.py; needs $BUILD/bench/cp-envs).
. "$(dirname "$0")/lib/common.sh"
bench_py memory
