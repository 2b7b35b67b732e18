#!/bin/sh
# cp-standby-pg.sh: two denv-cp on one throw-away PostgreSQL cluster
# (t/lib/pg.sh), one active and one standing by, a real denvd joined to both;
# take-over after kill -9, denvd's reconnect, the in-flight deployment, a lost
# lease, and 50 kill -9 take-overs losing no acknowledged write
# (t/sidecar/test_standby_pg.py). TAP. DENV_STANDBY_KILLS sets the 50.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_bins denvd denv-cp
suite_need_root "denvd's volumes, the postgres user"
suite_need_docker busybox
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cp-standby-pg.XXXXXX")
chmod 755 "$tmp"
trap 'sh "$top/t/lib/pg.sh" stop "$tmp/pg"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
mkdir "$tmp/pg"
if ! dsn=$(sh "$top/t/lib/pg.sh" start "$tmp/pg" 2>"$tmp/pg.err"); then
	echo "1..0 # SKIP no PostgreSQL server could be started: $(head -n 1 "$tmp/pg.err")"
	exit 0
fi
"$py" "$top/t/sidecar/test_standby_pg.py" "$top" "$tmp" "$dsn"
