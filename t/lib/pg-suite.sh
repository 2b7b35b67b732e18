#!/bin/sh
# pg-suite.sh SUITE: run t/cp/SUITE (a TAP-printing Python suite that takes
# its stores from cp_harness.py's Server) with the store on PostgreSQL: a
# throw-away cluster (t/lib/pg.sh) in a temp dir with every database of
# cp_harness.PG_DBS, stopped and removed at the end. Skips (TAP) when the
# program, python/.venv with websockets, or a server is missing.
set -u
top=${DENV_TOP:-$PWD}
suite=$1
py="$top/python/.venv/bin/python"
if [ ! -x "$top/bin/denv-cp" ]; then
	echo "1..0 # SKIP bin/denv-cp is not built"
	exit 0
fi
if [ ! -x "$py" ] || ! "$py" -c 'import websockets' 2>/dev/null; then
	echo "1..0 # SKIP python/.venv with websockets is not set up"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'sh "$top/t/lib/pg.sh" stop "$tmp"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
if ! dsn=$(sh "$top/t/lib/pg.sh" start "$tmp" gh gen moved store2 2>"$tmp/pg.err"); then
	echo "1..0 # SKIP no PostgreSQL server could be started: $(head -n 1 "$tmp/pg.err")"
	exit 0
fi
DENV_TOP="$top" DENV_TEST_PG_DSN="$dsn" "$py" "$top/t/cp/$suite"
