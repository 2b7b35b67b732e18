"""Two denv-cp processes on one PostgreSQL store (denv-cp(8), "Standby"),
with a real denvd joined to both (--server A,B): the second stands by (503
with Retry-After, /health "standby"); kill -9 of the active one, and the
standby serves within CP_TAKEOVER_S; denvd reconnects to it; the deployment
that was in flight ends failed with a reason; an active process whose
connection was cut while a standby took the lease stops (exit 1); and 50
kill -9 take-overs under a stream of writes lose no acknowledged write;
SIGTERM stops a standby.
argv: top tmp dsn."""
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(sys.argv[1], "bench", "lib"))
from fakecp import TAP, docker_leftovers, remove_project  # noqa: E402
from benchlib import free_port  # noqa: E402

top, tmp, dsn = sys.argv[1], sys.argv[2], sys.argv[3]
t = TAP()
KEY = "dak_standby_integration_key_0123456789ab"
TAKEOVER_S = 5  # CP_TAKEOVER_S in src/cp/cp.h
KILLS = int(os.environ.get("DENV_STANDBY_KILLS", "50"))
pgdir = re.search(r"host=([^&]+)", dsn).group(1)
# Healthy after 6 s: the kill lands while the host's answer is still to come.
SLOW = """
services:
  box:
    image: denv-test/busybox
    command: ["sh", "-c", "sleep 6; touch /tmp/ok; sleep 3600"]
    healthcheck: { test: ["CMD", "test", "-f", "/tmp/ok"], interval: 1s, retries: 120 }
"""


PORTS = [free_port(), free_port()]
URLS = ["http://127.0.0.1:%d" % p for p in PORTS]


def start_cp(i):
    """denv-cp number i (0 or 1) on its own port, both on the one store."""
    log = open(os.path.join(tmp, "cp%d.log" % i), "a")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DENV_")}
    env.update(DENV_BOOTSTRAP_KEY=KEY, DENV_FILES_DIR=os.path.join(tmp, "files"))
    return subprocess.Popen([top + "/bin/denv-cp", "-addr", "127.0.0.1:%d" % PORTS[i], "-db", dsn,
                             "-public-url", URLS[i]], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def req(i, method, path, body=None, timeout=10):
    """(status, JSON or text, headers) from cp i; status 0 when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(URLS[i] + path, data=data, method=method,
                               headers={"Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null"), resp.headers
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            return e.code, json.loads(text), e.headers
        except ValueError:
            return e.code, text, e.headers
    except (OSError, ValueError) as e:
        return 0, str(e), {}


def health(i):
    st, body, _ = req(i, "GET", "/health", timeout=2)
    return st, body


def wait_for(cond, limit, step=0.05):
    end = time.time() + limit
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    return cond()


def wait_active(i, limit):
    return wait_for(lambda: health(i)[0] == 200, limit)


def wait_standby(i, limit=10):
    return wait_for(lambda: health(i) == (503, {"status": "standby"}), limit)


def host_connected(i):
    st, h, _ = req(i, "GET", "/v1/hosts", timeout=2)
    hosts = h.get("hosts", []) if st == 200 else []
    return bool(hosts) and hosts[0].get("connected")


def psql(sql):
    pgbin = sorted(d for d in os.listdir("/usr/lib/postgresql"))[-1]
    cmd = ["/usr/lib/postgresql/%s/bin/psql" % pgbin, "-h", pgdir, "-U", re.search(r"user=(\w+)", dsn).group(1),
           "-d", "denv", "-tAc", sql]
    if os.getuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()


def kill9(p):
    p.send_signal(signal.SIGKILL)
    p.wait()


cps = [None, None]
denvd = None
env_id = None
try:
    # ---- one active, one standby ----
    cps[0] = start_cp(0)
    t.ok(wait_active(0, 10), "the first denv-cp on the store is active", health(0))
    cps[1] = start_cp(1)
    t.ok(wait_standby(1), "the second stands by: GET /health 503 {\"status\":\"standby\"}", health(1))
    st, body, hdr = req(1, "GET", "/v1/projects")
    t.ok(st == 503 and hdr.get("Retry-After") == "1" and "standby" in body.get("error", ""),
         "an API call to the standby: 503, Retry-After, an error that says standby", (st, body))
    st, body, _ = req(1, "GET", "/v1/hosts/stream")
    t.ok(st == 503, "and so is the host stream (denvd moves on to the next URL)", (st, body))

    # ---- a real denvd that knows both ----
    st, tok, _ = req(0, "POST", "/v1/join-tokens", {})
    log = open(os.path.join(tmp, "denvd.log"), "w")
    denvd = subprocess.Popen([top + "/bin/denvd", "join", "--server", URLS[0], "--server", URLS[1],
                              "--token", tok["token"], "--state", tmp + "/host.json", "--data", tmp + "/data",
                              "--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    t.ok(wait_for(lambda: host_connected(0), 15), "denvd --server A --server B joins the active one")
    req(0, "POST", "/v1/projects", {"name": "slow"})
    st, dep, _ = req(0, "POST", "/v1/projects/slow/deploy", {"compose": SLOW})
    dep_id = dep["deployment"]["ID"] if st == 202 else ""
    env_id = dep["deployment"]["EnvID"] if st == 202 else None

    def in_flight():
        """Running, its container up, not yet healthy: the host's answer is still to come."""
        st, dd, _ = req(0, "GET", "/v1/deployments/" + dep_id, timeout=2)
        return (st == 200 and dd["deployment"]["Status"] == "running" and env_id and
                docker_leftovers(env_id.lower())[0])
    t.ok(st == 202 and wait_for(in_flight, 60, 0.2), "a deployment is in flight, its container started", dep)

    # ---- kill -9 the active one ----
    t0 = time.time()
    kill9(cps[0])
    took = wait_active(1, 30) and time.time() - t0
    t.ok(took and took <= TAKEOVER_S, "kill -9 of the active one: the standby serves after %.2f s (at most %d)"
         % (took or -1, TAKEOVER_S), open(os.path.join(tmp, "cp1.log")).read()[-2000:])
    t.ok(wait_for(lambda: host_connected(1), 30, 0.2), "denvd reconnects to the new active one",
         open(os.path.join(tmp, "denvd.log")).read()[-1500:])
    st, dd, _ = req(1, "GET", "/v1/deployments/" + dep_id)
    d = dd.get("deployment", {}) if st == 200 else {}
    t.ok(d.get("Status") == "failed" and "control plane" in d.get("Error", ""),
         "the deployment in flight ended failed, saying why: %s" % d.get("Error"), dd)
    st, body, _ = req(1, "GET", "/v1/projects")
    t.ok(st == 200 and [p["Name"] for p in body["projects"]] == ["slow"], "what the first one wrote is there", body)

    # ---- an active one cut off while a standby takes the lease stops ----
    cps[0] = start_cp(0)
    t.ok(wait_standby(0), "the killed one, restarted, stands by")
    cps[1].send_signal(signal.SIGSTOP)
    cut = psql("SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND granted")
    t.ok(cut == "1" and wait_active(0, 10), "its connection cut, the active one's lease goes to the standby", cut)
    cps[1].send_signal(signal.SIGCONT)
    try:
        rc = cps[1].wait(timeout=20)
    except subprocess.TimeoutExpired:
        rc = None
    t.ok(rc == 1 and "lost the lease" in open(os.path.join(tmp, "cp1.log")).read(),
         "the old active one, woken, finds the lease taken and stops (exit %s)" % rc)
    t.ok(wait_for(lambda: host_connected(0), 45, 0.2), "denvd follows to the one that holds the lease")

    # ---- kill -9 loop: no acknowledged write lost ----
    cps[1] = start_cp(1)
    wait_standby(1)
    acked, stop, active = [], threading.Event(), [0]

    def writer():
        n = 0
        while not stop.is_set():
            n += 1
            name = "w%d" % n
            st, _, _ = req(active[0], "POST", "/v1/projects", {"name": name}, timeout=5)
            if st == 201:
                acked.append(name)
            elif st in (0, 503):
                time.sleep(0.02)
    th = threading.Thread(target=writer, daemon=True)
    th.start()
    slow, worst = 0, 0.0
    for k in range(KILLS):
        a = active[0]
        time.sleep(random.uniform(0.05, 0.3))
        t0 = time.time()
        kill9(cps[a])
        active[0] = 1 - a
        if not wait_active(1 - a, 30):
            break
        took = time.time() - t0
        worst = max(worst, took)
        slow += took > TAKEOVER_S
        cps[a] = start_cp(a)
        if not wait_standby(a):
            break
    else:
        k = KILLS
    time.sleep(0.3)
    stop.set()
    th.join(10)
    st, body, _ = req(active[0], "GET", "/v1/projects")
    have = {p["Name"] for p in body.get("projects", [])} if st == 200 else set()
    lost = [n for n in acked if n not in have]
    t.ok(k == KILLS and slow == 0, "%d kill -9 take-overs, each within %d s (the slowest %.2f s)"
         % (KILLS, TAKEOVER_S, worst),
         "ran %d, %d slow" % (k, slow))
    t.ok(st == 200 and len(acked) > KILLS and not lost,
         "%d acknowledged writes across them, 0 lost" % len(acked), "lost: %s" % lost[:20])
    sb = cps[1 - active[0]]
    sb.send_signal(signal.SIGTERM)
    try:
        rc = sb.wait(timeout=5)
    except subprocess.TimeoutExpired:
        rc = None
    t.ok(rc == 0, "SIGTERM stops a standby at once, exit 0 (%s)" % rc)
finally:
    for p in cps + [denvd]:
        if p and p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait()
    if env_id:
        remove_project(env_id.lower())
print("1..%d" % t.n)
sys.exit(1 if t.failed else 0)
