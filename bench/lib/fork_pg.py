"""Fork of the quickstart's stack with 100 MiB of PostgreSQL data (see
bench/fork-pg.sh): env.fork over denvd's websocket protocol (fakecp, as in
bench/fork.py, whose Run this reuses) against snapshot or `cp -a` + two
`docker run -d` + polling the database every 20 ms with a startup packet
from the host (the fairest raw readiness: no exec, no Docker interval).
The baseline's PostgreSQL is given the recovery_init_sync_method=syncfs
that denvd gives a fork's (pgfork.c), so both do the same work; the same
baseline without it, PostgreSQL's default, is in the note.

The parent is created, filled (CREATE TABLE ... AS over generate_series)
and snapshotted once, untimed; the snapshot CHECKPOINTs PostgreSQL first
(snapshot.c). Then rounds of one fork and one baseline, alternating which
goes first; round 0 is a warm-up."""
import json
import os
import re
import secrets
import signal
import socket
import struct
import subprocess
import time

import benchlib as B
import fork as F

IMAGE = "denv-test/debian"
PGDATA = "/var/lib/postgresql/data"
HEALTH = {"test": ["CMD-SHELL", "pg_isready -U postgres"], "interval": "1s", "retries": 60}
SERVICES = [
    {"name": "db", "image": IMAGE, "command": ["postgres"], "env": {"POSTGRES_PASSWORD": "world"}, "user": "",
     "volumes": ["pg:" + PGDATA], "ports": [], "depends_on": [], "resources": {}, "health": HEALTH},
    {"name": "box", "image": IMAGE, "command": ["sleep", "infinity"], "user": "1000:1000",
     "env": {"HOME": "/home/agent", "PGHOST": "db"}, "volumes": [], "ports": [], "depends_on": ["db"],
     "resources": {}},
]
SPEC = {"version": "ver_q", "egress": "deny", "volumes": ["pg"], "warm": [], "services": SERVICES}
ROWS = 100000  # about 100 MiB in the table's heap: 960 bytes of text a row
BACKENDS = ("btrfs", "dir")
POLL_S = 0.020


def key(backend):
    return "forkpg_%s" % backend


def declare():
    for b in BACKENDS:
        B.fig(key(b), "fork, quickstart (PostgreSQL 100 MiB + box), %s" % b,
              ("subvol snapshot" if b == "btrfs" else "cp -a") + " + 2 docker run + 20 ms poll (PG syncfs)", "s",
              "ratio<=1.1")
    B.fig("forkpg_btrfs_abs", "fork, quickstart 100 MiB, btrfs (absolute)", "-", "s", "<1")


def startup_ready(ip):
    """One startup packet to ip:5432: True when PostgreSQL accepts connections."""
    body = b"user\0postgres\0database\0postgres\0\0"
    pkt = struct.pack("!ii", 8 + len(body), 196608) + body
    try:
        with socket.create_connection((ip, 5432), timeout=0.5) as s:
            s.sendall(pkt)
            a = s.recv(512)
    except OSError:
        return False
    return bool(a) and (a[:1] == b"R" or (a[:1] == b"E" and b"C57P03" not in a))


def pg_log_times(container):
    """(recovery ms: PostgreSQL's start to 'ready to accept connections', its
    redo line or "") from the container's log (log_line_prefix has %m)."""
    out = B.sh("docker", "logs", container).stderr + B.sh("docker", "logs", container).stdout
    stamps = re.findall(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) \S+ \[\d+\] (.*)$", out, re.M)
    first = ready = None
    redo = ""
    for st, msg in stamps:
        t = time.mktime(time.strptime(st.split(".")[0], "%Y-%m-%d %H:%M:%S")) + float("0." + st.split(".")[1])
        first = t if first is None else first
        if "ready to accept connections" in msg and ready is None:
            ready = t
        if "redo" in msg:
            redo = msg.strip()
    return ((ready - first) * 1000 if first is not None and ready is not None else None), redo


class PgRun(F.Run):
    def parent(self):
        p = self.env("P")
        F.command(self.cp, "env.create", p, SPEC, timeout=600)
        r = B.sh("docker", "exec", "-u", "postgres", p.lower() + "-db-1", "psql", "-q", "-c",
                 "CREATE TABLE t AS SELECT g, repeat(md5(g::text), 30) AS pad FROM generate_series(1, %d) g"
                 % ROWS, timeout=900)
        B.need(r.returncode == 0, "filling the table: " + r.stderr.strip())
        snap = "ver_S" + secrets.token_hex(4).upper()
        res = F.command(self.cp, "env.snapshot", p, {"name": snap}, timeout=900)
        src = os.path.join(self.root, "snaps", p, snap, "pg")
        B.need(os.path.isdir(src), "no snapshot volume %s" % src)
        return p, snap, src, res

    def fork(self, p, snap):
        f = self.env("F")
        t0 = B.now()
        res = F.command(self.cp, "env.fork", f, {"from_env": p, "from_snapshot": snap, "services": SERVICES,
                                                 "volumes": ["pg"], "egress": "deny"}, timeout=900)
        return B.now() - t0, res, f

    def baseline(self, src, i, syncfs=True):
        """The raw equivalent; with syncfs, PostgreSQL gets the same
        recovery_init_sync_method as denvd gives a fork's (the same work)."""
        dst = os.path.join(self.raw, "q%d-%s" % (i, secrets.token_hex(3)))
        db, box = B.PREFIX + "db-" + os.path.basename(dst), B.PREFIX + "box-" + os.path.basename(dst)
        t0 = B.now()
        argv = ["btrfs", "subvolume", "snapshot", src, dst] if self.backend == "btrfs" else ["cp", "-a", src, dst]
        r = B.sh(*argv, timeout=900)
        B.need(r.returncode == 0, "%s: %s" % (" ".join(argv[:3]), r.stderr.strip()))
        r = B.sh("docker", "run", "-d", "--name", db, "-e", "POSTGRES_PASSWORD=world", "-v", dst + ":" + PGDATA,
                 IMAGE, "postgres", *(["-c", "recovery_init_sync_method=syncfs"] if syncfs else []))
        B.need(r.returncode == 0, "docker run db: " + r.stderr.strip())
        r = B.sh("docker", "run", "-d", "--name", box, "-u", "1000:1000", IMAGE, "sleep", "infinity")
        B.need(r.returncode == 0, "docker run box: " + r.stderr.strip())
        ip = B.sh("docker", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", db).stdout.strip()
        deadline = time.time() + 120
        while not startup_ready(ip):
            B.need(time.time() < deadline, "the baseline's PostgreSQL never accepted connections")
            time.sleep(POLL_S)
        return B.now() - t0, (dst, [db, box])


def one_backend(backend, n):
    run = None
    try:
        if backend == "btrfs":
            B.need(B.which("btrfs"), "btrfs not installed (btrfs-progs)")
        run = PgRun(backend)
        run.start()
        p, snap, src, sres = run.parent()
        forks, bases, plain, steps, ready, recov = [], [], [], [], [], []
        for rnd in range(1 + n):
            for what in (("fork", "base") if rnd % 2 == 0 else ("base", "fork")):
                F.warm(src)
                if what == "fork":
                    t, res, f = run.fork(p, snap)
                    rec = pg_log_times(f.lower() + "-db-1")
                    run.destroy(f)
                    if rnd:
                        B.sample(key(backend), t)
                        if backend == "btrfs":
                            B.sample("forkpg_btrfs_abs", t)
                        forks.append(t)
                        steps.append(res.get("timings") or {})
                        ready.append(res.get("readiness") or [])
                        recov.append(rec)
                else:
                    t, td = run.baseline(src, rnd)
                    run.unbaseline(td)
                    F.warm(src)
                    tp, td = run.baseline(src, rnd, syncfs=False)
                    run.unbaseline(td)
                    if rnd:
                        B.base(key(backend), t)
                        bases.append(t)
                        plain.append(tp)
                os.sync()
        med = lambda k: B.median([s.get(k, 0) for s in steps])  # noqa: E731
        db_ready = [r2.get("ready_ms") for rs in ready for r2 in rs if r2.get("service") == "db"]
        tests = sorted({r2.get("test") for rs in ready for r2 in rs if r2.get("service") == "db"})
        rec_ms = [r[0] for r in recov if r[0] is not None]
        B.note("forkpg %s: fork %s s, baseline %s s (with PostgreSQL's default fsync of every file instead of "
               "syncfs: %s s); denvd's steps (median ms) prepare %.0f, start %.0f "
               "(db ready before box starts: %s ms by %s), health+probe %.0f; the fork's PostgreSQL "
               "from start to accepting connections %s ms (%s); snapshot checkpoints %s, frozen %s" % (
                   backend, " ".join("%.2f" % x for x in forks), " ".join("%.2f" % x for x in bases),
                   " ".join("%.2f" % x for x in plain), med("prepare_ms"), med("start_ms"), B.median(db_ready) if db_ready else "?",
                   "/".join(t for t in tests if t) or "?", med("health_ms"),
                   "%.0f" % B.median(rec_ms) if rec_ms else "?",
                   (recov[-1][1] if recov and recov[-1][1] else "no redo line: a clean start"),
                   json.dumps(sres.get("checkpoints")), sres.get("frozen_for")))
    except B.Pending as ex:
        B.pending(key(backend), ex)
        if backend == "btrfs":
            B.pending("forkpg_btrfs_abs", ex)
    except (OSError, subprocess.SubprocessError, RuntimeError) as ex:
        B.pending(key(backend), "%s: %s" % (type(ex).__name__, ex))
    finally:
        if run:
            run.close()


def body():
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, F.interrupted)
    declare()
    why = ""
    if F.FakeCP is None:
        why = F.IMPORT_ERROR
    elif os.geteuid() != 0:
        why = "needs root (loop mount, volumes owned by other uids)"
    else:
        r = subprocess.run(["sh", B.TOP + "/t/docker-up.sh", "all"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True)
        if r.returncode != 0:
            why = "no Docker engine or fixture images (t/docker-up.sh all)"
    if why:
        for b in BACKENDS:
            B.pending(key(b), why)
        B.pending("forkpg_btrfs_abs", why)
        return
    n = B.runs(5, 2)
    for b in BACKENDS:
        one_backend(b, n)


B.main(body)
