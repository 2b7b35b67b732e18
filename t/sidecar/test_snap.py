"""Snapshot, fork and rollback through denvd on real Docker, one storage
backend per run (argv: denvd, tmp dir, backend, extra denvd flags...).

The quickstart sequence: a row and a file (plus a tree of awkward files:
hard links, symlinks, a sparse file, xattrs, a FIFO, odd owners and modes)
in the parent; snapshot; fork; the fork sees all of it; a write in the fork
is not seen in the parent; a second fork from the same version does not see
the first's; the parent rolls back exactly to the version. Then consistency:
a writer in the parent inserts into PostgreSQL and pushes to Redis in one
step each (counter row n, list length n); a snapshot taken mid-stream and
forked gives a PostgreSQL that starts without recovery errors and a Redis
list that is 1..L with L in {n-1, n}. Then keep_paused, and destroying the
parent while forks live (their origin snapshot stays and they can still roll
back to it), reclaimed when the last fork goes."""
import hashlib
import json
import os
import secrets
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, docker, docker_leftovers, remove_project  # noqa: E402

binary, tmp, backend = sys.argv[1], sys.argv[2], sys.argv[3]
extra = sys.argv[4:]
quick = os.environ.get("SNAP_QUICK") == "1"     # the zfs shim run: no consistency part
t = TAP()
tag = secrets.token_hex(4).upper()
P, F1, F2, F3 = ("env_SP%s%s" % (x, tag) for x in ("P", "A", "B", "C"))
envs = [P, F1, F2, F3]
cp = FakeCP()
d = Denvd(binary, tmp, cp.url, token=cp.token,
          extra=["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"] + extra)

PG = ["psql", "-U", "postgres", "-h", "/run/postgresql", "-v", "ON_ERROR_STOP=1", "-qAt"]
services = [
    {"name": "box", "image": "denv-test/busybox", "user": "1000:1000", "command": ["sleep", "3600"],
     "env": {"HOME": "/home/agent"}, "volumes": ["home:/home/agent"], "depends_on": ["db"],
     "ports": [], "resources": {"memory_mb": 256, "pids": 256, "cpus": 1}},
    {"name": "cache", "image": "denv-test/debian",
     "command": ["redis-server", "--appendonly", "yes", "--dir", "/data", "--save", "", "--protected-mode", "no"],
     "env": {}, "volumes": ["rd:/data"], "ports": [], "depends_on": [], "user": "",
     "health": {"test": ["CMD", "redis-cli", "PING"], "interval": "1s", "retries": 30},
     "resources": {"memory_mb": 512, "pids": 0, "cpus": 0}},
    {"name": "db", "image": "denv-test/debian", "command": ["postgres"],
     "env": {"POSTGRES_PASSWORD": "pw"}, "volumes": ["pg:/var/lib/postgresql/data"], "ports": [],
     "health": {"test": ["CMD", "pg_isready", "-U", "postgres", "-h", "/run/postgresql"],
                "interval": "1s", "retries": 60},
     "depends_on": [], "user": "", "resources": {"memory_mb": 0, "pids": 0, "cpus": 0}},
]
spec = {"version": "ver_snap", "egress": "deny", "volumes": ["home", "pg", "rd"], "warm": [], "services": services}
V1, V2, V3 = ("ver_%s%s" % (x, tag) for x in ("ONE", "TWO", "THREE"))


def ex(env, svc, cmd, timeout=60):
    res, _, _, _ = cp.command("env.exec", env, {"service": svc, "cmd": cmd, "timeout_sec": timeout},
                              timeout=timeout + 30)
    return res


def out(env, svc, cmd):
    r = ex(env, svc, cmd)
    if not r or not r.get("ok"):
        return "<failed: %r>" % (r,)
    p = r["payload"]
    return p["stdout"].strip() if p["exit_code"] == 0 else "<exit %d: %s>" % (p["exit_code"], p["stderr"].strip())


def sql(env, q):
    return out(env, "db", PG + ["-c", q])


def redis(env, *args):
    return out(env, "cache", ["redis-cli"] + list(args))


def vol_path(env, svc, dest):
    """The host directory bind-mounted at dest (whatever the backend's layout)."""
    ins = json.loads(docker("inspect", env.lower() + "-" + svc + "-1").stdout or "[{}]")[0]
    for m in ins.get("Mounts", []):
        if m.get("Destination") == dest:
            return m.get("Source")
    return None


def manifest(root):
    """Everything a copy must keep, per path."""
    m = {}
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            e = [stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, int(st.st_mtime)]
            if stat.S_ISREG(st.st_mode):
                e += [st.st_size, st.st_nlink, hashlib.sha256(open(p, "rb").read()).hexdigest()]
            elif stat.S_ISLNK(st.st_mode):
                e.append(os.readlink(p))
            try:
                e.append(sorted((k, os.getxattr(p, k, follow_symlinks=False)) for k in
                                os.listxattr(p, follow_symlinks=False)))
            except OSError:
                pass
            m[rel] = e
    return m


def awkward_tree(home):
    """Files a naive copy gets wrong, made from the host (root) in the volume."""
    a = os.path.join(home, "awk")
    os.mkdir(a)
    open(a + "/data", "w").write("linked\n")
    os.link(a + "/data", a + "/hardlink")
    os.symlink("data", a + "/rel-link")
    os.symlink("/etc/shadow", a + "/abs-link")      # never followed
    with open(a + "/sparse", "wb") as f:
        f.truncate(64 << 20)
        f.seek(32 << 20)
        f.write(b"x")
    os.setxattr(a + "/data", "user.denv", b"kept")
    os.mkfifo(a + "/fifo")
    open(a + "/odd", "w").write("odd\n")
    os.chown(a + "/odd", 1234, 5678)
    os.chmod(a + "/odd", 0o4750)
    os.mkdir(a + "/d711", 0o711)
    os.chown(a, 1000, 1000)
    os.utime(a + "/data", (1600000000, 1600000000))


def snapshot(env, name, keep=None):
    payload = {"name": name}
    if keep:
        payload["keep_paused"] = keep
    res, prog, _, _ = cp.command("env.snapshot", env, payload, timeout=300)
    return res, prog


def fork(new, src, name):
    payload = {"from_env": src, "from_snapshot": name, "services": services, "volumes": spec["volumes"],
               "egress": "deny"}
    t0 = time.time()
    res, prog, _, _ = cp.command("env.fork", new, payload, timeout=300)
    return res, prog, time.time() - t0


figures = {}
try:
    d.start()
    t.ok(cp.wait_conn(15), "denvd joins", d.logtext())
    hello = cp.hellos[-1]["payload"]["capabilities"]
    t.ok(hello.get("storage") == backend, "hello reports storage %s" % backend, hello)
    res, prog, _, _ = cp.command("env.create", P, spec, timeout=240)
    if not t.ok(res and res["ok"] and res["payload"].get("storage") == backend,
                "env.create of the parent (storage %s)" % backend, (res, d.logtext()[-3000:])):
        raise SystemExit(t.done())

    # ---- the quickstart sequence ----
    sql(P, "CREATE TABLE t (x text); INSERT INTO t VALUES ('parent-row')")
    out(P, "box", ["sh", "-c", "echo hello > /home/agent/file.txt"])
    redis(P, "RPUSH", "l", "parent")
    home = vol_path(P, "box", "/home/agent")
    awkward_tree(home)
    before = manifest(home)
    t.ok(sql(P, "SELECT x FROM t") == "parent-row" and out(P, "box", ["cat", "/home/agent/file.txt"]) == "hello",
         "a row and a file in the parent")

    res, prog = snapshot(P, V1)
    p = (res or {}).get("payload") or {}
    t.diag("snapshot: %s" % json.dumps(p))
    figures["frozen_for"] = p.get("frozen_for")
    t.ok(res and res["ok"] and p.get("snapshot") == V1 and len(p.get("datasets", [])) == 3 and
         p.get("consistent") is True and isinstance(p.get("frozen_for"), str) and p.get("storage") == backend,
         "env.snapshot: {snapshot, datasets (3), frozen_for, consistent}", (res, prog))
    ck = {c["kind"]: c for c in p.get("checkpoints", [])}
    t.ok(ck.get("postgres", {}).get("ok") and ck.get("redis", {}).get("ok") and
         ck["postgres"]["what"] == "CHECKPOINT" and ck["redis"]["what"] == "BGSAVE",
         "PostgreSQL CHECKPOINT and Redis BGSAVE ran before the freeze", p.get("checkpoints"))
    st = docker("inspect", "--format", "{{.State.Status}}", P.lower() + "-box-1", P.lower() + "-db-1").stdout.split()
    t.ok(st == ["running", "running"], "everything unpaused after the snapshot", st)
    res2, _ = snapshot(P, V1)
    t.ok(res2 and res2["ok"] and res2["payload"]["datasets"] == p.get("datasets"),
         "the same snapshot name again answers from the record", res2)

    res, prog, took = fork(F1, P, V1)
    figures["fork_s"] = took
    t.diag("fork F1: %.2f s (forked_in %s)" % (took, (res or {}).get("payload", {}).get("forked_in")))
    if not t.ok(res and res["ok"] and res["payload"].get("forked_in") and "endpoints" in res["payload"],
                "env.fork: {forked_in, endpoints}", (res, prog, d.logtext()[-2000:])):
        raise SystemExit(t.done())
    t.ok(sql(F1, "SELECT x FROM t") == "parent-row" and out(F1, "box", ["cat", "/home/agent/file.txt"]) == "hello"
         and redis(F1, "LRANGE", "l", "0", "-1") == "parent", "the fork sees the row, the file and the list")
    fhome = vol_path(F1, "box", "/home/agent")
    fm = manifest(fhome)
    diff = [k for k in set(before) | set(fm) if before.get(k) != fm.get(k) and k != "file.txt"]
    t.ok(not diff and fhome != home, "the fork's volume keeps owners, modes, times, hard links, symlinks, "
         "xattrs, the FIFO", [(k, before.get(k), fm.get(k)) for k in diff][:6])
    sp = os.lstat(os.path.join(fhome, "awk/sparse"))
    t.ok(sp.st_size == 64 << 20 and sp.st_blocks * 512 < 1 << 20, "the sparse file stays sparse (%d KiB allocated)"
         % (sp.st_blocks // 2))
    t.ok(os.path.samestat(os.lstat(fhome + "/awk/data"), os.lstat(fhome + "/awk/hardlink")),
         "the hard link is still one inode in the fork")

    sql(F1, "INSERT INTO t VALUES ('fork1-row')")
    out(F1, "box", ["sh", "-c", "echo fork1 > /home/agent/file.txt"])
    redis(F1, "RPUSH", "l", "fork1")
    t.ok(sql(P, "SELECT string_agg(x, ',') FROM t") == "parent-row" and
         out(P, "box", ["cat", "/home/agent/file.txt"]) == "hello" and redis(P, "LLEN", "l") == "1",
         "a write in the fork is not seen in the parent")

    res, prog, took = fork(F2, P, V1)
    t.ok(res and res["ok"], "a second fork from the same version", (res, prog))
    t.ok(sql(F2, "SELECT string_agg(x, ',') FROM t") == "parent-row" and
         out(F2, "box", ["cat", "/home/agent/file.txt"]) == "hello" and redis(F2, "LRANGE", "l", "0", "-1") == "parent",
         "the second fork does not see the first one's writes")
    sql(F2, "INSERT INTO t VALUES ('fork2-row')")
    t.ok(sql(F1, "SELECT string_agg(x, ',' ORDER BY x) FROM t") == "fork1-row,parent-row",
         "nor the first the second's")

    # ---- rollback ----
    sql(P, "INSERT INTO t VALUES ('after-row'); CREATE TABLE later (y int)")
    out(P, "box", ["sh", "-c", "echo changed > /home/agent/file.txt; rm -rf /home/agent/awk/d711; "
                   "touch /home/agent/new"])
    redis(P, "RPUSH", "l", "after")
    res, prog, _, _ = cp.command("env.rollback", P, {"snapshot": V1}, timeout=300)
    t.ok(res and res["ok"] and res["payload"].get("snapshot") == V1 and "endpoints" in res["payload"],
         "env.rollback: {snapshot, endpoints}", (res, prog))
    t.ok(sql(P, "SELECT string_agg(x, ',') FROM t") == "parent-row" and
         sql(P, "SELECT count(*) FROM pg_tables WHERE tablename = 'later'") == "0" and
         redis(P, "LRANGE", "l", "0", "-1") == "parent", "rollback: the row, the table and the list are the version's")
    home = vol_path(P, "box", "/home/agent")
    after = manifest(home)
    diff = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
    t.ok(not diff, "rollback: the home volume is exactly the version's (every path, owner, mode, time, xattr)",
         [(k, before.get(k), after.get(k)) for k in diff][:6])

    # ---- consistency under a writer ----
    if not quick:
        writer = ("psql -U postgres -h /run/postgresql -qc 'CREATE TABLE w (n int primary key); "
                  "CREATE TABLE c (n int); INSERT INTO c VALUES (0)' && i=0 && while :; do i=$((i+1)); "
                  "psql -U postgres -h /run/postgresql -qc \"BEGIN; INSERT INTO w VALUES ($i); "
                  "UPDATE c SET n = $i; COMMIT\" || exit 1; redis-cli -h cache RPUSH wl $i >/dev/null || exit 1; done")
        r = ex(P, "db", ["sh", "-c", "setsid sh -c \"$0\" >/tmp/writer.log 2>&1 </dev/null &", writer])
        time.sleep(3)
        n1 = sql(P, "SELECT n FROM c")
        res, prog = snapshot(P, V2)
        t.ok(res and res["ok"], "snapshot while the writer runs (frozen for %s)"
             % ((res or {}).get("payload", {}).get("frozen_for")), (res, prog))
        t.ok(any("freezing 3 container(s) with the cgroup freezer, pausing 0 with docker" in m for m in prog),
             "the freeze went through the cgroup freezer, not docker pause", prog)
        time.sleep(1)
        n2 = sql(P, "SELECT n FROM c")
        t.ok(n1.isdigit() and n2.isdigit() and int(n2) > int(n1) > 0,
             "the writer was writing before and goes on after (n %s -> %s)" % (n1, n2))
        res, prog, took = fork(F3, P, V2)
        t.ok(res and res["ok"], "fork of the mid-stream snapshot", (res, prog))
        logs = docker("logs", F3.lower() + "-db-1")
        pglog = logs.stdout + logs.stderr
        # A health probe that lands while PostgreSQL starts or replays its WAL
        # is turned away with a FATAL that is not an error of the data.
        benign = ("the database system is starting up", "the database system is in recovery mode",
                  "the database system is not yet accepting connections")
        bad = [ln for ln in pglog.splitlines() if "PANIC" in ln or "ERROR" in ln
               or ("FATAL" in ln and not any(b in ln for b in benign))]
        t.ok("ready to accept connections" in pglog and not bad,
             "PostgreSQL in the fork starts without recovery errors", "\n".join(bad) or pglog[-1500:])
        n = sql(F3, "SELECT n FROM c")
        cnt = sql(F3, "SELECT count(*) || ',' || coalesce(max(n), 0) FROM w")
        t.ok(n.isdigit() and cnt == "%s,%s" % (n, n), "PostgreSQL: counter row n = %s = count = max of the rows"
             % n, (n, cnt))
        ll = redis(F3, "LLEN", "wl")
        first, last = redis(F3, "LINDEX", "wl", "0"), redis(F3, "LINDEX", "wl", "-1")
        t.diag("capture instant: postgres n=%s, redis list length %s (first %s, last %s)" % (n, ll, first, last))
        t.ok(n.isdigit() and ll.isdigit() and int(ll) in (int(n) - 1, int(n)) and
             (int(ll) == 0 or (first == "1" and last == ll)),
             "Redis matches the capture instant: list is 1..L with L in {n-1, n}", (n, ll, first, last))

    # ---- keep_paused ----
    res, prog = snapshot(F1, V3, keep=["box"])
    stb = docker("inspect", "--format", "{{.State.Status}}", F1.lower() + "-box-1").stdout.strip()
    std = docker("inspect", "--format", "{{.State.Status}}", F1.lower() + "-db-1").stdout.strip()
    t.ok(res and res["ok"] and res["payload"].get("kept_paused") == ["box"] and stb == "paused" and std == "running",
         "keep_paused: box stays paused, the rest runs", (res, stb, std))
    docker("unpause", F1.lower() + "-box-1")

    # ---- destroy with live forks ----
    res, prog, _, _ = cp.command("env.destroy", P, {}, timeout=120)
    snapsP = os.path.join(d.data, "snaps", P)
    t.ok(res and res["ok"] and os.path.exists(os.path.join(snapsP, V1, "snapshot.json")) and
         os.path.exists(os.path.join(snapsP, "retired.json")),
         "destroying the parent keeps the snapshot its forks depend on", (res, prog))
    sql(F1, "INSERT INTO t VALUES ('gone-after-rollback')")
    res, prog, _, _ = cp.command("env.rollback", F1, {"snapshot": V1}, timeout=300)
    t.ok(res and res["ok"] and sql(F1, "SELECT string_agg(x, ',') FROM t") == "parent-row",
         "a fork rolls back to its origin version after the parent is gone", (res, prog))
    for e in (F3, F2):
        cp.command("env.destroy", e, {}, timeout=120)
    t.ok(os.path.exists(os.path.join(snapsP, V1, "snapshot.json")), "still kept while one fork lives")
    res, prog, _, _ = cp.command("env.destroy", F1, {}, timeout=120)
    t.ok(res and res["ok"] and not os.path.exists(snapsP), "reclaimed when the last fork is destroyed",
         (res, prog, os.listdir(snapsP) if os.path.exists(snapsP) else None))
    left = [e for e in envs if any(docker_leftovers(e.lower()))]
    t.ok(not left and not os.listdir(os.path.join(d.data, "envs")), "no container, network or env dir left",
         (left, os.listdir(os.path.join(d.data, "envs"))))
    if figures:
        t.diag("figures (%s): %s" % (backend, json.dumps(figures)))
finally:
    d.kill()
    for e in envs:
        remove_project(e.lower())
sys.exit(t.done())
