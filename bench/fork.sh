#!/bin/sh
# fork.sh: env.fork latency for 0, 100 MiB and 1 GiB of volume data in a
# two-service environment, on btrfs and on dir, each beside a baseline from
# the same run: `btrfs subvolume snapshot` (btrfs) or `cp -a` (dir) of the
# data plus `docker run -d` of the same two containers (bench/lib/fork.py).
# btrfs runs on an image FILE in the run's own temp dir, loop-mounted there
# and detached on every exit. QUICK=1: fewer runs, no 1 GiB.
#
# Needs root, Docker (t/docker-up.sh), btrfs-progs, python/.venv with
# websockets (denvd is driven over its websocket protocol by
# t/sidecar/fakecp.py); what is missing becomes a pending row.
. "$(dirname "$0")/lib/common.sh"
py=$TOP/python/.venv/bin/python
[ -x "$py" ] || py=python3
PYTHONPATH=$BENCH_DIR/lib:$TOP/t/sidecar${PYTHONPATH:+:$PYTHONPATH} exec "$py" "$BENCH_DIR/lib/fork.py"
