#!/bin/sh
# fork-pg.sh: env.fork of the quickstart's stack (PostgreSQL holding a
# 100 MiB table, with its stock pg_isready healthcheck, and the agent's box)
# on btrfs and on dir, beside the raw equivalent measured in the same run:
# snapshot (btrfs) or `cp -a` (dir) of the data, two `docker run -d`, and a
# 20 ms readiness poll (a startup packet from the host). The notes say where
# the fork's time went (denvd's prepare/start/health steps, which readiness
# test passed when) and how long the fork's PostgreSQL took to start
# (recovery), from its own log (bench/lib/fork_pg.py). QUICK=1: fewer runs.
# Needs what bench/fork.sh needs, and the denv-test/debian image.
. "$(dirname "$0")/lib/common.sh"
py=$TOP/python/.venv/bin/python
[ -x "$py" ] || py=python3
PYTHONPATH=$BENCH_DIR/lib:$TOP/t/sidecar${PYTHONPATH:+:$PYTHONPATH} exec "$py" "$BENCH_DIR/lib/fork_pg.py"
