#!/bin/sh
# pg.sh: a throw-away PostgreSQL cluster for tests, never the system's.
#   sh t/lib/pg.sh start DIR [DB...]
#                              initdb in DIR/data, listen only on a Unix
#                              socket in DIR, create database denv (and each
#                              DB); prints
#                              the DSN (postgresql:///denv?host=DIR&user=...)
#   sh t/lib/pg.sh stop DIR    stop it (fast), leave DIR for the caller
#   sh t/lib/pg.sh resume DIR  start a stopped one again
# DIR must be a fresh directory the caller made (mktemp -d) and removes.
# As root the server runs as the postgres user (initdb refuses root).
# Exit 1 with a message on stderr when no server can be started (callers skip).
set -u
bin=${DENV_PG_BIN:-}
if [ -z "$bin" ]; then
	for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && bin=$d; done
fi
[ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "pg.sh: no initdb (install Debian package postgresql)" >&2; exit 1; }

cmd=${1:-}
dir=${2:-}
# A stop for a directory already gone (removed with its server's data) is done.
[ "$cmd" = stop ] && [ -n "$dir" ] && [ ! -d "$dir" ] && exit 0
[ -n "$dir" ] && [ -d "$dir" ] || { echo "usage: pg.sh start|stop DIR" >&2; exit 1; }

if [ "$(id -u)" = 0 ]; then
	user=postgres
	as() { runuser -u postgres -- "$@"; }
else
	user=$(id -un)
	as() { "$@"; }
fi

case $cmd in
start)
	[ "$(id -u)" = 0 ] && chown postgres "$dir"
	as "$bin/initdb" -D "$dir/data" -A trust -U "$user" --no-sync >"$dir/initdb.log" 2>&1 ||
		{ echo "pg.sh: initdb failed: $(tail -n 3 "$dir/initdb.log")" >&2; exit 1; }
	as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
		-o "-c listen_addresses='' -k $dir" start >/dev/null 2>&1 ||
		{ echo "pg.sh: the server did not start: $(tail -n 3 "$dir/server.log")" >&2; exit 1; }
	shift 2
	for db in denv "$@"; do
		as "$bin/createdb" -h "$dir" -U "$user" "$db" ||
			{ echo "pg.sh: createdb $db failed" >&2; exit 1; }
	done
	echo "postgresql:///denv?host=$dir&user=$user"
	;;
resume)
	as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
		-o "-c listen_addresses='' -k $dir" start >/dev/null 2>&1 ||
		{ echo "pg.sh: the server did not start again: $(tail -n 3 "$dir/server.log")" >&2; exit 1; }
	;;
stop)
	[ -f "$dir/data/postmaster.pid" ] || exit 0
	as "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
		as "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1
	;;
*)
	echo "usage: pg.sh start|stop|resume DIR" >&2; exit 1 ;;
esac
