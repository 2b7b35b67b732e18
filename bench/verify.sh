#!/bin/sh
# verify.sh: verify end to end with a busybox verifier image, on dir and on
# btrfs (bench/lib/verify.py; btrfs on an image file in its own temp dir).
. "$(dirname "$0")/lib/common.sh"
bench_py verify
