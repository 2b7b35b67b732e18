#!/bin/sh
# build.sh: a compose build: of a 3-layer Dockerfile through denv (the
# deploy's prepare phase: the context sent to the host and built there)
# against `docker build -` of the same context, cold and cached; and the
# Engine API build against denvd's docker CLI fallback (bench/lib/build.py).
. "$(dirname "$0")/lib/common.sh"
py=$TOP/python/.venv/bin/python
[ -x "$py" ] || py=python3
PYTHONPATH=$BENCH_DIR/lib${PYTHONPATH:+:$PYTHONPATH} exec "$py" "$BENCH_DIR/lib/build.py"
