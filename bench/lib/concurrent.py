"""50 concurrent sandboxes: the wall time until 50 POST /v1/sandboxes sent at
once (image form, busybox) have all answered 201, against 50 `docker run -d`
of the same image started at once. CONCURRENT_N overrides 50.

An image sandbox is one service with egress denied, so it gets no network of
its own (Docker's none network); an environment that has one takes a /25 of
denvd's pool (DENV_SUBNET_POOL), never one of dockerd's ~31 default ones."""
import os
import subprocess
import threading
import time

import benchlib as B

KEY = "concurrent"
IMAGE = "denv-test/busybox"
N = int(os.environ.get("CONCURRENT_N", "50"))


def baseline_once(run, N, key):
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
        B.base(key, (t1 - t0))
    return ok


CUT = []  # requests the server closed without an answer, per run


def deployments_of(s, project):
    """[(env id, deployment row)] of the deploys in project."""
    out = []
    st, r = s.req("GET", "/v1/projects/%s/envs" % project)
    for env in (r.get("environments", []) if st == 200 else []):
        st, d = s.req("GET", "/v1/envs/%s/deployments" % env["ID"])
        for dep in (d.get("deployments", []) if st == 200 else []):
            if dep.get("Kind") == "deploy":
                out.append((env["ID"], dep))
    return out


def denv_once(s, N, project):
    """Seconds until all N sandboxes are healthy. A request the server closes
    without an answer (the parked-request timer, see the note) does not stop
    its deployment: then the end is the last deployment's own FinishedAt."""
    res = [None] * N

    def one(i):
        try:
            res[i] = s.req("POST", "/v1/sandboxes", {"image": IMAGE, "cmd": ["sleep", "3600"], "timeout_sec": 300,
                                                     "project": project})
        except Exception as e:  # reported below
            res[i] = (0, str(e))

    th = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(N)]
    w0 = time.time()
    t0 = B.now()
    for t in th:
        t.start()
    for t in th:
        t.join()
    took = B.now() - t0
    cut = [r for r in res if r[0] == 0]
    bad = [r for r in res if r[0] not in (0, 201)]
    CUT.append(len(cut))
    deps = deployments_of(s, project)
    for env, _ in deps:
        s.envs.add(env)
    if cut and not bad:
        end = time.time() + 300
        while time.time() < end:
            deps = deployments_of(s, project)
            if len(deps) >= N and all(d["Status"] not in ("pending", "queued", "running") for _, d in deps):
                break
            time.sleep(0.2)
        failed = [d for _, d in deps if d["Status"] != "succeeded"]
        if len(deps) < N or failed:
            bad = [(502, {"error": "%d of %d deployments did not succeed: %s" % (
                len(failed) + N - len(deps), N, failed[0].get("Error") if failed else "missing")})]
        else:
            took = max(B.ts(d["FinishedAt"]) for _, d in deps) - w0
    s.destroy_envs()  # teardown, not timed
    if bad:
        st, r = bad[0]
        raise B.Pending("%d of %d sandboxes failed; first: %s %s" % (
            len(bad), N, st, r.get("error", r) if isinstance(r, dict) else r))
    return took


def measure(s, key, n_conc, runs):
    for i in range(runs):
        baseline_once(i, n_conc, key)
        B.sample(key, denv_once(s, n_conc, "cc-%s-%d" % (key.replace("_", "-"), i)))
    if any(CUT):
        B.note("concurrent: denv-cp closed %s of %d parked POST /v1/sandboxes without an answer after 10 s "
               "(runs: %s); their end was read from the deployments' FinishedAt" % (
                   max(CUT), n_conc, ", ".join(map(str, CUT))))
    del CUT[:]


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
                baseline_once(i, N, KEY)
            raise B.Pending("POST /v1/sandboxes: %s %s" % (st, r.get("error", r) if isinstance(r, dict) else r))
        s.envs.add(r["environment"]["ID"])
        st, d = s.req("DELETE", "/v1/envs/" + r["environment"]["ID"])
        if st == 202:
            s.wait_dep(d["deployment"]["ID"], limit=60)
        s.envs.clear()
        measure(s, KEY, N, n)
    except B.Pending as p:
        B.pending(KEY, p)
    finally:
        s.close()


B.main(body)
