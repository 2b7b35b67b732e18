#!/bin/sh
# snapshot.sh: the snapshot's frozen window with PostgreSQL and Redis holding
# about 100 MiB, on dir and on btrfs (bench/lib/snapshot.py; btrfs on an
# image file in its own temp dir, loop-mounted, detached on exit).
. "$(dirname "$0")/lib/common.sh"
bench_py snapshot
