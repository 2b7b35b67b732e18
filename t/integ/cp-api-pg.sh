#!/bin/sh
# cp-api-pg.sh: the REST API suite (t/cp/test_api.py) with the store on
# PostgreSQL: a throw-away cluster (t/lib/pg.sh) in a temp dir, stopped at the end.
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
[ -x "$py" ] || py=python3
if [ ! -x "$top/bin/denv-cp" ]; then
	echo "1..0 # SKIP bin/denv-cp is not built"
	exit 0
fi
tmp=$(mktemp -d) || exit 1
trap 'sh "$top/t/lib/pg.sh" stop "$tmp"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
if ! dsn=$(sh "$top/t/lib/pg.sh" start "$tmp" gh gen moved 2>"$tmp/pg.err"); then
	echo "1..0 # SKIP no PostgreSQL server could be started: $(head -n 1 "$tmp/pg.err")"
	exit 0
fi
DENV_TOP="$top" DENV_TEST_PG_DSN="$dsn" "$py" "$top/t/cp/test_api.py"
