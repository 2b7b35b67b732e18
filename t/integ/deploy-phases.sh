#!/bin/sh
# deploy-phases.sh: `denv deploy --wait` against a real denv-cp and a joined
# denvd on real Docker, for what a deploy's phases say:
#   - x-denv.warm as a string and in the blog's one-string-list form runs
#     under sh -c and seeds data (PostgreSQL over the stack's network);
#   - a failing warm shows its stderr tail in the evidence and on the CLI
#     (and an argv naming no program shows what Docker said on stdout);
#   - start's started_in_ms is the containers' start, and the phases'
#     timestamps say so (prepare no longer holds it);
#   - -v prints whole evidence, without it long evidence is cut;
#   - a service whose image is not here fails at prepare, naming service,
#     image and host, and leaves no container, network or volume behind.
# Prints TAP; removes its containers, networks and data even on failure.
suite=deploy-phases
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "1..0 # SKIP Docker or the fixture images are not usable here"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP needs root (volumes owned by uid 1000)"
	exit 0
fi
stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined"
denv project create --kind rl-environment w1 >/dev/null 2>&1

# ---- warm: the blog's one-string list, over the network, seeding a table ----
# (warm runs in the first service by name: db, as in the blog)
# The healthcheck's 30 s interval keeps Docker's own verdict out of the race:
# under load it once said healthy before PostgreSQL's own answer was asked.
cat >"$tmp/blog.yaml" <<'EOF'
x-denv:
  warm: ["printf 'create table orders (id int); insert into orders values (1), (2);' > /tmp/orders.sql && psql -h db -U postgres -f /tmp/orders.sql"]
services:
  db:
    image: denv-test/debian:latest
    command: ["postgres"]
    volumes: ["pg:/var/lib/postgresql/data"]
    healthcheck: { test: ["CMD-SHELL", "pg_isready -U postgres"], interval: 30s, retries: 4 }
  opsbox:
    image: denv-test/busybox:latest
    command: ["sleep", "infinity"]
    depends_on: [db]
volumes: { pg: {} }
EOF
run deploy --project w1 --env blog -f "$tmp/blog.yaml" -v
ok $rc "the blog's warm form deploys (exit $rc)"
dep=$(dep_of_out)
doc_of "$dep"
[ "$(py 'd["deployment"]["Params"]["warm"][:2]')" = "['sh', '-c']" ]
ok $? "a one-string warm list runs under sh -c"
[ "$(exec_out w1/blog db psql -U postgres -tAc 'select count(*) from orders')" = 2 ]
ok $? "the warm command seeded the table through psql -h db"
has '"prepared_in_ms":'
ok $? "-v: the prepare line holds its whole evidence"

# ---- timings: start holds the containers' start, prepare does not ----
# py prints the phase's seconds between StartedAt and FinishedAt.
dur='(lambda p: (__import__("datetime").datetime.fromisoformat(p["FinishedAt"].replace("Z", "+00:00")) - __import__("datetime").datetime.fromisoformat(p["StartedAt"].replace("Z", "+00:00"))).total_seconds() * 1000)'
ph='{p["Name"]: p for p in d["phases"]}'
started=$(py "$ph[\"start\"][\"Evidence\"][\"started_in_ms\"]")
start_ms=$(py "int($dur($ph[\"start\"]))")
prep_ms=$(py "int($dur($ph[\"prepare\"]))")
prep_ev=$(py "$ph[\"prepare\"][\"Evidence\"][\"prepared_in_ms\"]")
echo "# started_in_ms $started, start phase $start_ms ms, prepare phase $prep_ms ms (host: $prep_ev ms)"
# Waiting for db's health before opsbox starts is part of the start.
[ "$started" -gt 0 ] && [ "$start_ms" -ge $((started - 50)) ] && [ "$start_ms" -le $((started + 50)) ]
ok $? "the start phase lasts its started_in_ms ($start_ms ms vs $started ms)"
[ "$prep_ms" -ge "$prep_ev" ] && [ "$prep_ms" -le $((prep_ev + 2000)) ]
ok $? "the prepare phase lasts the host's prepare step, not the start too ($prep_ms ms vs $prep_ev ms)"
[ "$(py "$ph[\"health\"][\"StartedAt\"] == $ph[\"start\"][\"FinishedAt\"] and $ph[\"start\"][\"StartedAt\"] == $ph[\"prepare\"][\"FinishedAt\"]")" = True ]
ok $? "prepare, start and health follow each other"
[ "$(py "'healthy_in_ms' in $ph[\"health\"][\"Evidence\"]")" = True ]
ok $? "health's evidence says how long the health step took"
[ "$(py "{r['service']: r['test'] for r in $ph[\"health\"][\"Evidence\"].get('readiness', [])}.get('db')")" = postgres ]
ok $? "health's evidence says db was found ready by PostgreSQL's own answer (readiness)"

# ---- warm as a string; without -v long evidence is cut ----
cat >"$tmp/string.yaml" <<'EOF'
x-denv:
  warm: "mkdir -p /tmp/w && echo seeded > /tmp/w/seed.txt && echo 'quotes, pipes' | tr a-z A-Z > /tmp/w/up.txt"
services:
  box:
    image: denv-test/busybox:latest
    command: ["sleep", "infinity"]
EOF
run deploy --project w1 --env string -f "$tmp/string.yaml"
ok $rc "a string warm deploys (exit $rc)"
[ "$(exec_out w1/string box cat /tmp/w/seed.txt)" = seeded ] &&
	[ "$(exec_out w1/string box cat /tmp/w/up.txt)" = "QUOTES, PIPES" ]
ok $? "the string ran under sh -c (&&, quotes and a pipe)"
grep '^  prepare ' "$tmp/out" | grep -q '\.\.\.$' && ! has '"prepared_in_ms":'
ok $? "without -v the long prepare evidence is cut"

# ---- a failing warm: its stderr tail in the evidence and on the CLI ----
cat >"$tmp/fail.yaml" <<'EOF'
x-denv:
  warm: "echo to stdout; i=0; while [ $i -lt 400 ]; do echo noise line $i >&2; i=$((i + 1)); done; echo the last complaint >&2; exit 3"
services:
  box:
    image: denv-test/busybox:latest
    command: ["sleep", "infinity"]
EOF
run deploy --project w1 --env fail -f "$tmp/fail.yaml"
[ "$rc" = 1 ]
ok $? "a failing warm fails the deploy (exit $rc)"
grep -q '^  warm       failed    warm command exited 3: the last complaint$' "$tmp/out"
ok $? "the warm line gives the exit code and the last stderr line"
grep -q '^             | noise line 399$' "$tmp/out" && grep -q '^             | the last complaint$' "$tmp/out"
ok $? "the stderr tail follows the warm line"
grep -q 'denv: deployment dep_.* failed: warm: warm command exited 3: the last complaint' "$tmp/err"
ok $? "the closing error names it too"
doc_of "$(dep_of_out)"
ev='[p for p in d["phases"] if p["Name"] == "warm"][0]["Evidence"]'
[ "$(py "$ev[\"exit\"]")" = 3 ] && [ "$(py "len($ev[\"stderr\"]) <= 2048 + 4")" = True ] &&
	[ "$(py "$ev[\"stderr\"].startswith('...\\n') and $ev[\"stderr\"].endswith('noise line 399\\nthe last complaint\\n')")" = True ]
ok $? "the evidence keeps the bounded tail of stderr, from a line's start"

# An argv naming no program: Docker says so on the exec's stdout, and that is shown.
cat >"$tmp/noprog.yaml" <<'EOF'
x-denv:
  warm: [no-such-program, --seed]
services:
  box:
    image: denv-test/busybox:latest
    command: ["sleep", "infinity"]
EOF
run deploy --project w1 --env noprog -f "$tmp/noprog.yaml"
grep -q '^  warm       failed    warm command exited 12[67]: .*no-such-program.*not found' "$tmp/out"
ok $? "a warm argv naming no program says why (exit $rc)"

# ---- a missing image fails at prepare and leaves nothing behind ----
cat >"$tmp/noimg.yaml" <<'EOF'
services:
  home:
    image: denv-test/not-built-here:1
    command: ["sleep", "infinity"]
    volumes: ["data:/data"]
  box:
    image: denv-test/busybox:latest
    command: ["sleep", "infinity"]
volumes: { data: {} }
EOF
run deploy --project w1 --env noimg -f "$tmp/noimg.yaml"
[ "$rc" = 1 ]
ok $? "a deploy with a missing image fails (exit $rc)"
host=$(hostname)
want="  prepare    failed    service \"home\" image \"denv-test/not-built-here:1\" is not on host \"$host\" and no registry answered: build it (docker build), load it (docker load), or use a local image (denv images / make images lists them)"
grep -qxF -- "$want" "$tmp/out"
ok $? "prepare names the service, the image, the host and what to do"
env_id=$(denv env get w1/noimg | "$top/python/.venv/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["environment"]["ID"])')
proj=$(printf '%s' "$env_id" | tr 'A-Z' 'a-z')
[ -n "$proj" ] && [ -z "$(docker ps -aq --filter "label=com.docker.compose.project=$proj")" ] &&
	! docker network inspect "${proj}_default" >/dev/null 2>&1
ok $? "no container and no network of that environment"
[ ! -e "$tmp/data/envs/$env_id/volumes" ] && [ -z "$(find "$tmp/data" -path "*$env_id*" -name data 2>/dev/null)" ]
ok $? "no volume of that environment"

for e in blog string fail noprog noimg; do denv env destroy "w1/$e" >/dev/null 2>&1; done
for e in blog string fail noprog noimg; do stack_wait_destroyed "w1/$e"; done
suite_done
