"""Snapshot frozen window: PostgreSQL and Redis (denv-test/debian) holding
about 100 MiB together (a PostgreSQL table of ~80 MiB, ~20 MiB of Redis
values saved to its volume), then POST /v1/envs/{id}/snapshot, several times;
the figure is the snapshot phase's own `frozen_for` (writers paused to
unpaused), on the dir backend and on btrfs (an image file, loop-mounted).
Between snapshots about 1% of the table is rewritten so that each one has
dirty data to deal with. No baseline (the issue sets none)."""
import time

import benchlib as B

COMPOSE = """
x-denv:
  egress: deny
services:
  cache:
    image: denv-test/debian
    command: ["redis-server", "--dir", "/data", "--save", "", "--protected-mode", "no"]
    volumes: ["rd:/data"]
    healthcheck: { test: ["CMD", "redis-cli", "ping"], interval: 1s, retries: 60 }
  db:
    image: denv-test/debian
    command: ["postgres"]
    environment: { POSTGRES_PASSWORD: pw }
    volumes: ["pg:/var/lib/postgresql/data"]
    healthcheck: { test: ["CMD", "pg_isready", "-U", "postgres", "-h", "/run/postgresql"], interval: 1s, retries: 60 }
volumes: { pg: {}, rd: {} }
"""
PSQL = ["psql", "-X", "-q", "-U", "postgres", "-h", "/run/postgresql", "-v", "ON_ERROR_STOP=1"]
# ~20 MiB of Redis values that do not compress to nothing: chained SHA-1s.
REDIS_FILL = ("local h = 'x' for i = 1, 20000 do local t = {} for j = 1, 25 do h = redis.sha1hex(h) t[j] = h end "
              "redis.call('SET', 'k' .. i, table.concat(t)) end return 1")


def exec_ok(s, env, svc, cmd, timeout=600):
    st, r = s.req("POST", "/v1/envs/%s/exec" % env, {"service": svc, "cmd": cmd, "timeout_sec": timeout})
    B.need(st == 200 and r.get("exit_code") == 0, "%s: %s %s" % (" ".join(cmd[:3]), st, r))
    return r["stdout"]


def one_backend(backend, key, n):
    fs = None
    s = None
    try:
        args = ()
        if backend == "btrfs":
            fs = B.Btrfs("4G")
            args = ("--btrfs-root", fs.root)
        s = B.Stack("snap-" + backend, sidecar_args=args)
        st, h = s.req("GET", "/v1/hosts")
        got = h["hosts"][0].get("Capabilities", {}).get("storage")
        B.need(got == backend, "the host reports storage %r, not %r" % (got, backend))
        env, dd = s.deploy("pgredis", COMPOSE)
        B.need(dd["deployment"]["Status"] == "succeeded", "deploy: " + s.failed_phase(dd))
        exec_ok(s, env, "db", PSQL + ["-c", "CREATE TABLE blob AS SELECT g, repeat(md5(g::text), 28) AS pad "
                                       "FROM generate_series(1, 85000) g"])
        exec_ok(s, env, "cache", ["redis-cli", "EVAL", REDIS_FILL, "0"])
        exec_ok(s, env, "cache", ["redis-cli", "SAVE"])
        pg = exec_ok(s, env, "db", ["du", "-sm", "/var/lib/postgresql/data"]).split()[0]
        tbl = exec_ok(s, env, "db", PSQL + ["-tAc", "SELECT pg_total_relation_size('blob') / 1048576"]).strip()
        rd = exec_ok(s, env, "cache", ["du", "-sm", "/data"]).split()[0]
        ends = []
        for i in range(n):
            exec_ok(s, env, "db", PSQL + ["-c", "UPDATE blob SET g = g WHERE g %% 100 = %d" % i])
            t0 = B.now()
            st, r = s.req("POST", "/v1/envs/%s/snapshot" % env)
            B.need(st == 202, "POST snapshot: %s %s" % (st, r))
            dd = s.wait_dep(r["deployment"]["ID"])
            ends.append(B.now() - t0)
            B.need(dd["deployment"]["Status"] == "succeeded", "snapshot: " + s.failed_phase(dd))
            ev = {p["Name"]: p.get("Evidence") or {} for p in dd["phases"]}.get("snapshot", {})
            ms = B.parse_ms(ev.get("frozen_for"))
            B.need(ms is not None, "no frozen_for in the snapshot evidence: %s" % ev)
            B.sample(key, ms)
        B.note("snapshot %s: a %s MiB table and %s MiB of Redis (volumes on disk: %s MiB PostgreSQL with its WAL, "
               "%s MiB Redis); a snapshot deployment takes %.2f s end to end (median)" % (
                   backend, tbl, rd, pg, rd, B.median(ends)))
    except B.Pending as p:
        B.pending(key, p)
    finally:
        if s:
            s.close()
        if fs:
            fs.close()


def body():
    B.fig("frozen_dir", "snapshot frozen window, PG+Redis 100 MiB, dir", None, "ms", "report")
    B.fig("frozen_btrfs", "snapshot frozen window, PG+Redis 100 MiB, btrfs", None, "ms", "<100")
    why = B.docker_ready()
    if why:
        B.pending("frozen_dir", why)
        B.pending("frozen_btrfs", why)
        return
    n = B.runs(5, 2)
    one_backend("dir", "frozen_dir", n)
    one_backend("btrfs", "frozen_btrfs", n)


B.main(body)
