"""50 concurrent sandboxes: the wall time until 50 POST /v1/sandboxes sent at
once (image form, busybox) have all answered 201, against 50 `docker run -d`
of the same image started at once. CONCURRENT_N overrides 50."""
import os
import subprocess
import threading

import benchlib as B

KEY = "concurrent"
IMAGE = "denv-test/busybox"
N = int(os.environ.get("CONCURRENT_N", "50"))


def baseline_once(run):
    names = ["%scc-%d-%d" % (B.PREFIX, run, i) for i in range(N)]
    t0 = B.now()
    ps = [subprocess.Popen(["docker", "run", "-d", "--name", nm, IMAGE, "sleep", "3600"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
          for nm in names]
    ok = all(p.wait() == 0 for p in ps)
    t1 = B.now()
    for i in range(0, N, 25):
        B.sh("docker", "rm", "-f", "-v", *names[i:i + 25])
    if ok:
        B.base(KEY, (t1 - t0))
    return ok


def denv_once(s):
    res = [None] * N

    def one(i):
        try:
            res[i] = s.req("POST", "/v1/sandboxes", {"image": IMAGE, "cmd": ["sleep", "3600"], "timeout_sec": 300})
        except Exception as e:  # reported below
            res[i] = (0, str(e))

    th = [threading.Thread(target=one, args=(i,)) for i in range(N)]
    t0 = B.now()
    for t in th:
        t.start()
    for t in th:
        t.join()
    t1 = B.now()
    bad = [r for r in res if r[0] != 201]
    for st, r in res:
        if st == 201:
            s.envs.add(r["environment"]["ID"])
    # Teardown, not timed.
    deps = []
    for env in list(s.envs):
        st, d = s.req("DELETE", "/v1/envs/" + env)
        if st == 202:
            deps.append(d["deployment"]["ID"])
    for d in deps:
        s.wait_dep(d, limit=120)
    s.envs.clear()
    if bad:
        st, r = bad[0]
        raise B.Pending("%d of %d sandboxes failed; first: %s %s" % (
            len(bad), N, st, r.get("error", r) if isinstance(r, dict) else r))
    return t1 - t0


def body():
    B.fig(KEY, "%d concurrent sandboxes created" % N, "%d concurrent docker run -d" % N, "s", "ratio<=1.3")
    why = B.docker_ready()
    if why:
        B.pending(KEY, why)
        return
    n = B.runs(3, 1)
    try:
        s = B.Stack("concurrent")
    except B.Pending as p:
        B.pending(KEY, p)
        return
    try:
        # One sandbox first: when the path does not work yet, say so quickly.
        st, r = s.req("POST", "/v1/sandboxes", {"image": IMAGE, "cmd": ["sleep", "3600"], "timeout_sec": 120})
        if st != 201:
            for i in range(n):
                baseline_once(i)
            raise B.Pending("POST /v1/sandboxes: %s %s" % (st, r.get("error", r) if isinstance(r, dict) else r))
        s.envs.add(r["environment"]["ID"])
        st, d = s.req("DELETE", "/v1/envs/" + r["environment"]["ID"])
        if st == 202:
            s.wait_dep(d["deployment"]["ID"], limit=60)
        s.envs.clear()
        for i in range(n):
            baseline_once(i)
            B.sample(KEY, denv_once(s))
    except B.Pending as p:
        B.pending(KEY, p)
    finally:
        s.close()


B.main(body)
