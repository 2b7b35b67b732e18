"""Scale: one denv-cp with many simulated sidecars joined (bench/lib/fleet.py,
the real host stream) and many environments in its store, on the file store
and on PostgreSQL (a throw-away cluster, t/lib/pg.sh). Per backend:

  scale_*_rss      denv-cp RSS after the run below
  scale_*_get      p50 and p99 of GET /v1/envs/{id} (random environments,
                   one keep-alive connection, one request at a time)
  scale_*_cmd      p50 and p99 of POST /v1/envs/{id}/exec on random
                   environments: denv-cp sends env.exec down that host's
                   stream and answers with the sidecar's result
  scale_*_replay   restart on the filled store: from exec until it answers
                   GET /v1/envs/{id}
  scale_*_back     then until every simulated sidecar is connected again
                   (they come back with their secrets)
  scale_*_deploy   p50 of a few deploys of a one-service compose file to new
                   projects, every command answered by a simulated sidecar

The baseline of each figure is the same run at 1 host and 100 environments
on the same backend. Steps: denv-cp on a fresh store; HOSTS join tokens
(POST /v1/join-tokens) and HOSTS simulated sidecars joined with them; both
stopped; the store filled by bench/cp-envs.c (ENVS environments, each with
a healthy version and a succeeded eleven-phase deploy, spread over the
joined hosts, written through the store's API as denv-cp writes them: much
faster than 100,000 deploys, the same rows); denv-cp restarted (replay);
the sidecars come back with their secrets; the GETs, the execs, then a few
real deploys (every command answered by a simulated sidecar) that must
succeed.

Sizes: SCALE_HOSTS x SCALE_ENVS; default 100 x 10,000 (20 x 2,000 with
QUICK=1), under a minute; DENV_BENCH_SCALE=full (or BENCH_LONG=1, with
the other long rows): 1,000 x 100,000 (the issue's size), 5 to 9 minutes
on a shared 2-core VM. SCALE_BACKENDS="file
pg" picks the backends.
"""
import http.client
import json
import os
import random
import select
import shutil
import subprocess
import tempfile
import time

import benchlib as B

FULL = os.environ.get("DENV_BENCH_SCALE") == "full" or os.environ.get("BENCH_LONG", "") not in ("", "0")
HOSTS = int(os.environ.get("SCALE_HOSTS") or (1000 if FULL else 20 if B.QUICK else 100))
ENVS = int(os.environ.get("SCALE_ENVS") or (100000 if FULL else 2000 if B.QUICK else 10000))
BACKENDS = (os.environ.get("SCALE_BACKENDS") or "file pg").split()
BASE_HOSTS, BASE_ENVS = 1, 100
ENVS_PER_PROJECT = 100
GETS = 500 if B.QUICK else 2000
EXECS = 100 if B.QUICK else 500
DEPLOYS = 5 if B.QUICK else 10
SAMPLE_PROJECTS = 50      # projects whose environments are the random picks
FLEET_JOIN_S = 900        # every sidecar admitted (1,000 hellos on a loaded machine)
CP_START_S = 900          # denv-cp listening after replaying the store
VENV_PY = os.path.join(B.TOP, "python", ".venv", "bin", "python")
# A deploy on a simulated host: one service, one volume.
COMPOSE = """services:
  box:
    image: denv-test/busybox
    command: ["sleep", "3600"]
    volumes: ["data:/data"]
volumes: { data: {} }
"""
# denv-cp's default cap of 64 connections per address would refuse the
# sidecars (all on 127.0.0.1) past the 64th.
CP_ENV = {"DENV_MAX_CONNS_PER_ADDR": "0"}


def rss_anon_kib(pid):
    """RssAnon of pid (KiB): the heap, without the store's log pages mapped from disk."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def rss_at(s, step):
    """(step, denv-cp's RSS, its RssAnon), in MiB."""
    return step, B.rss_kib(s.cp.pid) / 1024.0, rss_anon_kib(s.cp.pid) / 1024.0


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100.0))]


class Fleet:
    """bench/lib/fleet.py as a child process, admitted."""

    def __init__(self, work, port, creds):
        self.path = os.path.join(work, "creds.json")
        with open(self.path, "w") as f:
            json.dump(creds, f)
        self.log = os.path.join(work, "fleet.log")
        self.proc = subprocess.Popen([VENV_PY, os.path.join(B.TOP, "bench", "lib", "fleet.py"), str(port), self.path],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=open(self.log, "w"), text=True)
        try:
            t0 = B.now()
            line = self._first_line()
            self.join_s = B.now() - t0
            B.need(line.startswith("fleet: admitted"), "simulated sidecars: %s" % (line.strip() or self._tail()))
        except BaseException:
            self.stop()
            raise

    def _first_line(self):
        """The fleet's one line once all are in (or refused); '' after FLEET_JOIN_S."""
        ready, _, _ = select.select([self.proc.stdout], [], [], FLEET_JOIN_S)
        return self.proc.stdout.readline() if ready else ""

    def _tail(self):
        with open(self.log) as f:
            return " | ".join(f.read().strip().splitlines()[-3:]) or "exited"

    def creds(self):
        with open(self.path) as f:
            return json.load(f)

    def stop(self):
        """SIGTERM; the fleet's closing line (commands answered by kind)."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            out, _ = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return (out or "").strip()


class Keepalive:
    """One HTTP/1.1 connection to denv-cp, timed request by request."""

    def __init__(self, s):
        self.key = s.key
        self.c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)

    def call(self, method, path, body=None):
        """(status, decoded body, milliseconds)."""
        data = json.dumps(body) if body is not None else None
        hdr = {"Authorization": "Bearer " + self.key, "Content-Type": "application/json"}
        t0 = B.now()
        self.c.request(method, path, body=data, headers=hdr)
        r = self.c.getresponse()
        raw = r.read()
        ms = (B.now() - t0) * 1000
        return r.status, json.loads(raw) if raw else None, ms

    def close(self):
        self.c.close()


def wait_connected(s, n, limit):
    """Seconds until GET /v1/hosts shows n connected hosts."""
    t0 = B.now()
    while B.now() - t0 < limit:
        st, h = s.req("GET", "/v1/hosts")
        if st == 200 and sum(1 for x in h.get("hosts", []) if x.get("connected")) >= n:
            return B.now() - t0
        time.sleep(0.2)
    raise B.Pending("fewer than %d hosts connected after %d s" % (n, limit))


def join(work, db, hosts):
    """A fresh store with the first team and `hosts` joined hosts: (key, creds)."""
    s = B.Stack("scale", sidecar=False, db=db, cp_env=CP_ENV)
    try:
        toks = []
        for _ in range(hosts):
            st, t = s.req("POST", "/v1/join-tokens", {})
            B.need(st == 201, "POST /v1/join-tokens: %s %s" % (st, t))
            toks.append({"token": t["token"]})
        fl = Fleet(work, s.port, toks)
        try:
            wait_connected(s, hosts, FLEET_JOIN_S)
            return s.key, fl.creds()
        finally:
            fl.stop()
    finally:
        s.close()


def fill(db, envs):
    r = B.sh(os.path.join(B.BUILD, "bench", "cp-envs"), db, str(envs), str(ENVS_PER_PROJECT), timeout=7200)
    B.need(r.returncode == 0, "cp-envs: " + (r.stderr.strip() or r.stdout.strip()))
    return r.stdout.strip()


def restart(db, key):
    """denv-cp on the filled store: (stack, ms until it answered, an env id)."""
    t0 = B.now()
    s = B.Stack("scale", sidecar=False, db=db, key=key, cp_env=CP_ENV, start_timeout=CP_START_S)
    try:
        st, r = s.req("GET", "/v1/projects")
        B.need(st == 200 and r["projects"], "GET /v1/projects: %s" % st)
        st, e = s.req("GET", "/v1/projects/%s/envs" % r["projects"][0]["ID"])
        B.need(st == 200 and e["environments"], "GET envs: %s" % st)
        env = e["environments"][0]["ID"]
        st, _ = s.req("GET", "/v1/envs/" + env)
        B.need(st == 200, "GET /v1/envs/%s: %s" % (env, st))
        return s, (B.now() - t0) * 1000, r["projects"]
    except BaseException:
        s.close()
        raise


def sample_envs(s, projects):
    ids = []
    for p in random.sample(projects, min(SAMPLE_PROJECTS, len(projects))):
        st, e = s.req("GET", "/v1/projects/%s/envs" % p["ID"])
        B.need(st == 200, "GET envs: %s %s" % (st, e))
        ids += [x["ID"] for x in e["environments"]]
    B.need(ids, "no environments listed")
    return ids


def timed(s, ids, n, one):
    """Milliseconds of n calls one(connection, env id, i), each on a random environment."""
    c = Keepalive(s)
    try:
        return [one(c, random.choice(ids), i) for i in range(n)]
    finally:
        c.close()


def get_env(c, env, i):
    st, r, ms = c.call("GET", "/v1/envs/" + env)
    B.need(st == 200 and r["environment"]["ID"] == env, "GET /v1/envs/%s: %s" % (env, st))
    return ms


def exec_echo(c, env, i):
    word = "scale-%d" % i
    st, r, ms = c.call("POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": ["echo", word]})
    B.need(st == 200 and r.get("stdout") == word + "\n", "exec on %s: %s %s" % (env, st, r))
    return ms


def deploys(s, n):
    took = []
    for i in range(n):
        t0 = B.now()
        env, dd = s.deploy("scale-deploy-%d" % i, COMPOSE)
        B.need(dd["deployment"]["Status"] == "succeeded", "deploy %d: %s" % (i, s.failed_phase(dd)))
        took.append((B.now() - t0) * 1000)
    return took


def run(db, hosts, envs):
    """Every figure of one backend at one size: a dict."""
    work = tempfile.mkdtemp(prefix="denv-bench-scale.", dir=os.environ.get("TMPDIR", "/tmp"))
    fl = s = None
    try:
        B.log("scale: %d hosts joining" % hosts)
        key, creds = join(work, db, hosts)
        t0 = B.now()
        filled = fill(db, envs)
        fill_s = B.now() - t0
        B.log("scale: %s in %.0f s; restarting" % (filled, fill_s))
        s, replay_ms, projects = restart(db, key)
        rss = [rss_at(s, "start")]
        fl = Fleet(work, s.port, creds)
        back_s = wait_connected(s, hosts, FLEET_JOIN_S) + fl.join_s
        rss.append(rss_at(s, "hosts back"))
        ids = sample_envs(s, projects)
        gets = timed(s, ids, GETS, get_env)
        rss.append(rss_at(s, "GETs"))
        execs = timed(s, ids, EXECS, exec_echo)
        rss.append(rss_at(s, "execs"))
        deps = deploys(s, DEPLOYS)
        rss.append(rss_at(s, "deploys"))
        return {"rss": rss[-1][1], "rss_steps": ", ".join("%s %.1f (anon %.1f)" % r for r in rss),
                "replay": replay_ms, "get": gets, "cmd": execs, "deploy": deps, "back_s": back_s, "fill_s": fill_s,
                "answered": fl.stop()}
    finally:
        if fl:
            fl.stop()
        if s:
            s.close()
        if os.environ.get("BENCH_KEEP"):
            B.log("kept " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)


class Postgres:
    """A throw-away cluster (t/lib/pg.sh) with one database per run."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="denv-bench-scale-pg.", dir=os.environ.get("TMPDIR", "/tmp"))
        r = B.sh("sh", os.path.join(B.TOP, "t", "lib", "pg.sh"), "start", self.dir, "base", "big", timeout=120)
        if r.returncode != 0:
            self.close()
            raise B.Pending(r.stderr.strip() or "t/lib/pg.sh start failed")
        self.dsn = r.stdout.strip()

    def db(self, name):
        return self.dsn.replace("/denv?", "/%s?" % name, 1)

    def close(self):
        B.sh("sh", os.path.join(B.TOP, "t", "lib", "pg.sh"), "stop", self.dir, timeout=120)
        shutil.rmtree(self.dir, ignore_errors=True)


FIGS = (("rss", "denv-cp RSS", "MiB"), ("get_p50", "GET /v1/envs/{id} p50", "ms"),
        ("get_p99", "GET /v1/envs/{id} p99", "ms"), ("cmd_p50", "exec round trip p50", "ms"),
        ("cmd_p99", "exec round trip p99", "ms"), ("replay", "start-up replay until it answers", "ms"),
        ("back", "every host back after the restart", "s"), ("deploy", "deploy p50 on a simulated host", "ms"))


def figures(r):
    return {"rss": r["rss"], "get_p50": pct(r["get"], 50), "get_p99": pct(r["get"], 99),
            "cmd_p50": pct(r["cmd"], 50), "cmd_p99": pct(r["cmd"], 99), "replay": r["replay"], "back": r["back_s"],
            "deploy": pct(r["deploy"], 50)}


def backend(name, dbs):
    """Declare, measure and emit one backend's figures. dbs(): (big, base)."""
    label = {"file": "file store", "pg": "PostgreSQL"}[name]
    keys = ["scale_%s_%s" % (name, k) for k, _, _ in FIGS]
    for k, (_, what, unit) in zip(keys, FIGS):
        B.fig(k, "%s, %s: %d hosts, %d envs" % (what, label, HOSTS, ENVS), "%d host, %d envs" % (BASE_HOSTS, BASE_ENVS),
              unit, "report")
    try:
        big_db, base_db = dbs()
        base = run(base_db, BASE_HOSTS, BASE_ENVS)
        big = run(big_db, HOSTS, ENVS)
    except B.Pending as p:
        for k in keys:
            B.pending(k, p)
        return
    fb, fs = figures(base), figures(big)
    for k, (short, _, _) in zip(keys, FIGS):
        B.base(k, fb[short])
        B.sample(k, fs[short])
    B.note("scale (%s): store filled in %.0f s (bench/cp-envs); RSS (MiB) after each step: %s; %d GETs, %d execs "
           "on random environments; %d deploys on simulated hosts, all succeeded; %s" % (
               label, big["fill_s"], big["rss_steps"], len(big["get"]), len(big["cmd"]), len(big["deploy"]),
               big["answered"]))


def missing():
    """Why the benchmark cannot run here, or ''."""
    if not os.access(VENV_PY, os.X_OK) or B.sh(VENV_PY, "-c", "import websockets").returncode != 0:
        return "python/.venv with websockets is not set up (sh t/deps.sh)"
    if not os.access(os.path.join(B.BUILD, "bench", "cp-envs"), os.X_OK):
        return "%s/bench/cp-envs not built (make bench)" % B.BUILD
    return ""


def file_backend(why):
    work = tempfile.mkdtemp(prefix="denv-bench-scale-db.", dir=os.environ.get("TMPDIR", "/var/tmp"))
    try:
        backend("file", lambda: B.need(not why, why) or (os.path.join(work, "big"), os.path.join(work, "base")))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def pg_backend(why):
    pg = []

    def dbs():
        B.need(not why, why)
        pg.append(Postgres())
        return pg[0].db("big"), pg[0].db("base")
    try:
        backend("pg", dbs)
    finally:
        if pg:
            pg[0].close()


def body():
    B.note("scale: %d simulated sidecars (bench/lib/fleet.py, the real host stream, 10 s heartbeats), %d environments%s"
           % (HOSTS, ENVS, "" if FULL else "; DENV_BENCH_SCALE=full for 1,000 x 100,000"))
    why = missing()
    for name in BACKENDS:
        {"file": file_backend, "pg": pg_backend}[name](why)


B.main(body)
