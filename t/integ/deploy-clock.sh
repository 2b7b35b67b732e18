#!/bin/sh
# deploy-clock.sh: x-denv.clock on a real denv-cp, a joined denvd and real
# Docker (libfaketime preloaded from the host, fakeclock.c):
#   - frozen at a declared instant: exec'd date, python3's time.time() and a
#     grandchild shell all read the instant, in the service and in a fork;
#     PostgreSQL's now() runs on from it;
#   - a bare `frozen` is the deploy's instant, recorded once: a fork of it
#     reads the same instant;
#   - offset: real time shifted by the offset;
#   - the prepare phase's evidence records {mode, at | offset, mechanism};
#   - a statically linked service (busybox) under a frozen clock fails the
#     deploy with the reason, never runs on the real clock silently.
# Prints TAP; removes its containers, networks and data even on failure.
suite=deploy-clock
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
# reads ENV INSTANT: date, python3 and a grandchild shell in ENV's app all read INSTANT.
reads() {
	d=$(exec_out "$1" app date -u +%s)
	p=$(exec_out "$1" app python3 -c 'import time; print(int(time.time()))')
	c=$(exec_out "$1" app sh -c 'sh -c "date -u +%s"')
	echo "# $1: date $d, python3 $p, sh -c sh -c date $c (want $2)"
	[ "$d" = "$2" ] && [ "$p" = "$2" ] && [ "$c" = "$2" ]
}

if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "1..0 # SKIP Docker or the fixture images are not usable here"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP needs root (denvd reads /proc/<pid>/maps of the containers)"
	exit 0
fi
if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]; then
	echo "1..0 # SKIP no libfaketime on this host (t/deps.sh installs it)"
	exit 0
fi
stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined"
denv project create --kind rl-environment clk >/dev/null 2>&1

# ---- frozen at a declared instant, and a fork of it ----
cat >"$tmp/frozen.yaml" <<'EOF'
x-denv:
  clock: {mode: frozen, at: "2026-01-01T00:00:00Z"}
services:
  app:
    image: denv-test/debian:latest
    command: ["sleep", "infinity"]
  db:
    image: denv-test/debian:latest
    command: ["postgres"]
    healthcheck: { test: ["CMD-SHELL", "pg_isready -U postgres"], interval: 1s, retries: 60 }
EOF
run deploy --project clk --env frozen -f "$tmp/frozen.yaml" -v
ok $rc "a frozen clock deploys on the bookworm image (exit $rc)"
reads clk/frozen 1767225600
ok $? "exec'd date, python3 and a grandchild shell read the declared instant"
pg=$(exec_out clk/frozen db psql -U postgres -tAc 'select extract(epoch from now())::bigint')
echo "# PostgreSQL now(): $pg"
[ "$pg" -ge 1767225600 ] && [ "$pg" -le $((1767225600 + 300)) ]
ok $? "PostgreSQL's now() is the instant plus the postmaster's uptime"
ev_of "$(dep_of_out)" prepare
[ "$(py 'd["clock"]["mode"], d["clock"]["at"], "libfaketime" in d["clock"]["mechanism"]')" = "('frozen', '2026-01-01T00:00:00Z', True)" ]
ok $? "the prepare evidence records the clock: mode, at, mechanism"
sleep 2
reads clk/frozen 1767225600
ok $? "seconds later a new process still starts at the instant"
run fork --name frozen-f1 clk/frozen
ok $rc "fork of the frozen environment (exit $rc)"
reads clk/frozen-f1 1767225600
ok $? "the fork reads the same instant"
denv deployment get "$(dep_of_out)" >"$tmp/doc" 2>/dev/null
[ "$(py '[p["Evidence"]["clock"]["at"] for p in d["phases"] if "clock" in (p.get("Evidence") or {})]')" = "['2026-01-01T00:00:00Z']" ]
ok $? "the fork's clone evidence records the same clock"

# ---- bare frozen: the deploy's instant, the same in every fork ----
cat >"$tmp/bare.yaml" <<'EOF'
x-denv:
  clock: frozen
services:
  app:
    image: denv-test/debian:latest
    command: ["sleep", "infinity"]
EOF
before=$(date -u +%s)
run deploy --project clk --env bare -f "$tmp/bare.yaml"
ok $rc "a bare frozen deploys (exit $rc)"
ev_of "$(dep_of_out)" prepare
at=$(py 'd["clock"]["at"]')
at_s=$(date -u -d "$at" +%s 2>/dev/null || echo 0)
[ "$at_s" -ge $((before - 1)) ] && [ "$at_s" -le "$(date -u +%s)" ]
ok $? "its instant is the deploy's ($at)"
sleep 2
reads clk/bare "$at_s"
ok $? "the environment reads the recorded instant, not the time now"
run fork --name bare-f1 clk/bare
ok $rc "fork of the bare frozen environment (exit $rc)"
reads clk/bare-f1 "$at_s"
ok $? "the fork reads the same recorded instant"

# ---- offset: real time shifted ----
cat >"$tmp/offset.yaml" <<'EOF'
x-denv:
  clock: {mode: offset, offset: "-24h"}
services:
  app:
    image: denv-test/debian:latest
    command: ["sleep", "infinity"]
EOF
run deploy --project clk --env offset -f "$tmp/offset.yaml"
ok $rc "an offset clock deploys (exit $rc)"
now=$(date -u +%s)
got=$(exec_out clk/offset app date -u +%s)
py_got=$(exec_out clk/offset app python3 -c 'import time; print(int(time.time()))')
want=$((now - 86400))
echo "# offset: host $now, date $got, python3 $py_got (want about $want)"
[ "$got" -ge $((want - 5)) ] && [ "$got" -le $((want + 10)) ] &&
	[ "$py_got" -ge $((want - 5)) ] && [ "$py_got" -le $((want + 10)) ]
ok $? "the service reads real time minus a day"
ev_of "$(dep_of_out)" prepare
[ "$(py 'd["clock"]["mode"], d["clock"]["offset_sec"]')" = "('offset', -86400)" ]
ok $? "the evidence records the offset"

# ---- a static binary cannot be reached: the deploy fails and says why ----
cat >"$tmp/static.yaml" <<'EOF'
x-denv:
  clock: frozen
services:
  box:
    image: denv-test/busybox:latest
    command: ["sleep", "infinity"]
EOF
run deploy --project clk --env static -f "$tmp/static.yaml"
[ "$rc" = 1 ]
ok $? "a frozen clock on the static busybox fails the deploy (exit $rc)"
grep -qF 'service "box": x-denv.clock frozen cannot reach its program: it did not load libfaketime (a statically linked binary' "$tmp/out"
ok $? "the prepare line says the program ignores LD_PRELOAD"

suite_done
