#!/bin/sh
# The `make demo` walk-through as a test: t/demo-run.sh must pass from start
# to end (it exits non-zero at the first broken expectation).
top=${DENV_TOP:-$(pwd)}
echo "1..1"
if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "ok 1 # SKIP Docker is not usable here"
	exit 0
fi
out=$(mktemp)
if sh "$top/t/demo-run.sh" >"$out" 2>&1; then
	echo "ok 1 - make demo's script: $(tail -n 1 "$out")"
else
	echo "not ok 1 - make demo's script"
	sed 's/^/# /' "$out" | tail -n 60
fi
rm -f "$out"
