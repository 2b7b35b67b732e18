#!/bin/sh
# sandbox.sh: sandbox create -> first exec (POST /v1/sandboxes, image form)
# against `docker run -d` + `docker exec` (bench/lib/sandbox.py).
. "$(dirname "$0")/lib/common.sh"
bench_py sandbox
