"""sandbox create -> first exec: POST /v1/sandboxes (image form, busybox
fixture, answered when healthy) then POST /v1/envs/{id}/exec `true`, against
`docker run -d` of the same image and command then `docker exec` `true`.
Runs alternate; the teardown of each (destroy, docker rm) is not timed.
Then the same create claimed from a warm pool (denv-cp -sandbox-pool, size
2) -> first exec, against the cold creates above; the refill is awaited
between claims and not timed."""
import json
import time

import benchlib as B

KEY = "sandbox"
POOL_KEY = "sandbox_pool"
POOL_SIZE = 2
COLD = []  # the cold creates' ms: the pool row's baseline
SPLIT = {}  # "claim", "first exec" -> [ms] of the pool row
PHASES = {}  # phase name -> [ms], from the deployments' own timestamps
IMAGE = "denv-test/busybox"


def baseline_once(i):
    name = "%ssbx-%d" % (B.PREFIX, i)
    t0 = B.now()
    r = B.sh("docker", "run", "-d", "--name", name, IMAGE, "sleep", "3600")
    ok = r.returncode == 0 and B.sh("docker", "exec", name, "true").returncode == 0
    t1 = B.now()
    B.sh("docker", "rm", "-f", "-v", name)
    if ok and i > 0:
        B.base(KEY, (t1 - t0) * 1000)
    return ok


def denv_once(s):
    """ms, or raises Pending with the reason."""
    t0 = B.now()
    st, r = s.req("POST", "/v1/sandboxes", {"image": IMAGE, "cmd": ["sleep", "3600"], "timeout_sec": 120})
    if st != 201:
        B.note("sandbox: POST /v1/sandboxes answered %s after %.0f ms (not a figure)" % (st, (B.now() - t0) * 1000))
        raise B.Pending("POST /v1/sandboxes: %s %s" % (st, r.get("error", r) if isinstance(r, dict) else r))
    env = r["environment"]["ID"]
    s.envs.add(env)
    st, x = s.req("POST", "/v1/envs/%s/exec" % env, {"service": "main", "cmd": ["true"]})
    t1 = B.now()
    if st != 200 or x.get("exit_code") != 0:
        raise B.Pending("first exec: %s %s" % (st, x))
    COLD.append((t1 - t0) * 1000)
    st, dd = s.req("GET", "/v1/deployments/" + r["deployment"]["ID"])
    if st == 200:
        for k, v in B.phase_ms(dd).items():
            PHASES.setdefault(k, []).append(v)
    st, d = s.req("DELETE", "/v1/envs/" + env)
    if st == 202:
        s.wait_dep(d["deployment"]["ID"], limit=60)
    return (t1 - t0) * 1000


def pool_ready(s, want, limit=120):
    end = B.now() + limit
    while B.now() < end:
        st, r = s.req("GET", "/v1/pools")
        if st == 200 and r["pools"] and r["pools"][0]["ready"] >= want:
            return
        time.sleep(0.05)
    raise B.Pending("the warm pool did not fill to %d in %d s" % (want, limit))


def claim_once(s):
    """ms from POST /v1/sandboxes (claimed) to the first exec's answer."""
    pool_ready(s, POOL_SIZE)
    t0 = B.now()
    st, r = s.req("POST", "/v1/sandboxes", {"image": IMAGE, "cmd": ["sleep", "3600"], "timeout_sec": 120})
    if st != 201:
        raise B.Pending("POST /v1/sandboxes (pool): %s %s" % (st, r))
    env = r["environment"]["ID"]
    s.envs.add(env)
    tc = B.now()
    st, x = s.req("POST", "/v1/envs/%s/exec" % env, {"service": "main", "cmd": ["true"]})
    t1 = B.now()
    if st != 200 or x.get("exit_code") != 0:
        raise B.Pending("first exec (pool): %s %s" % (st, x))
    SPLIT.setdefault("claim", []).append((tc - t0) * 1000)
    SPLIT.setdefault("first exec", []).append((t1 - tc) * 1000)
    st, d = s.req("DELETE", "/v1/envs/" + env)
    if st == 202:
        s.wait_dep(d["deployment"]["ID"], limit=60)
    return (t1 - t0) * 1000


def pool_rows(n):
    B.fig(POOL_KEY, "warm-pool claim -> first exec (busybox, pool of %d)" % POOL_SIZE,
          "cold create -> first exec (above)", "ms", "<100")
    for v in COLD:
        B.base(POOL_KEY, v)
    pool = {"image": IMAGE, "cmd": ["sleep", "3600"], "size": POOL_SIZE}
    try:
        s = B.Stack("sandbox-pool", cp_env={"DENV_SANDBOX_POOL": json.dumps(pool)})
    except B.Pending as p:
        B.pending(POOL_KEY, p)
        return
    try:
        for _ in range(n):
            B.sample(POOL_KEY, claim_once(s))
        st, r = s.req("GET", "/v1/pools")
        if st == 200 and r["pools"]:
            B.note("sandbox_pool: a claim is one store commit in denv-cp (src/cp/pool.c), no call to denvd; "
                   "where the time goes (medians): %s; pool after the run: %s"
                   % (", ".join("%s %.1f ms" % (k, B.median(v)) for k, v in SPLIT.items()),
                      json.dumps(r["pools"][0])))
    except B.Pending as p:
        B.pending(POOL_KEY, p)
    finally:
        s.close()


def body():
    B.fig(KEY, "sandbox create -> first exec (busybox)", "docker run -d + docker exec", "ms", "ratio<=0.8")
    why = B.docker_ready()
    if why:
        B.pending(KEY, why)
        return
    n = B.runs(7, 3)
    baseline_once(0)  # warm the image and the engine, not recorded
    try:
        s = B.Stack("sandbox")
    except B.Pending as p:
        B.pending(KEY, p)
        return
    done = 0
    try:
        for i in range(n):
            B.sample(KEY, denv_once(s))
            baseline_once(1 + i)
            done += 1
    except B.Pending as p:
        B.pending(KEY, p)
        for i in range(done, n):  # the baseline still, for the record
            baseline_once(1 + i)
    finally:
        s.close()
    if PHASES:
        B.note("sandbox: the container is created and started on dockerd's API socket (src/sidecar/engine_run.c), "
               "not by a docker run process; where the time goes (median phase durations from the deployment record): " +
               ", ".join("%s %.0f ms" % (k, B.median(v)) for k, v in PHASES.items() if B.median(v) >= 1))
    pool_rows(n)


B.main(body)
