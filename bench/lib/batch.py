"""Batches: one POST /v1/sandboxes/batch against the same number of parallel
POST /v1/sandboxes, each timed until every member is healthy.

  batch_20         20 sandboxes from one image
  batch_forks_100  100 forks of one version (20 with QUICK=1; BATCH_FORKS
                   overrides), against as many parallel from_version calls

Both sides run on the same stack in the same run, alternately; every member
is destroyed (untimed) before the next side starts."""
import os
import threading
import time

import benchlib as B

IMAGE = "denv-test/busybox"
N_IMAGE = 20
N_FORKS = int(os.environ.get("BATCH_FORKS") or (20 if B.QUICK else 100))


def singles(s, n, body):
    """Seconds until n parallel POST /v1/sandboxes have all answered 201."""
    res = [None] * n

    def one(i):
        try:
            res[i] = s.req("POST", "/v1/sandboxes", dict(body, timeout_sec=600))
        except Exception as e:  # reported below
            res[i] = (0, str(e))

    th = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    t0 = B.now()
    for t in th:
        t.start()
    for t in th:
        t.join()
    took = B.now() - t0
    for st, r in res:
        if st == 201:
            s.envs.add(r["environment"]["ID"])
    bad = [r for r in res if r[0] != 201]
    s.destroy_envs()
    if bad:
        raise B.Pending("%d of %d single sandboxes failed; first: %s %s" % (len(bad), n, bad[0][0], bad[0][1]))
    return took


def batch(s, n, body):
    """Seconds from one POST /v1/sandboxes/batch until no member is pending."""
    t0 = B.now()
    st, r = s.req("POST", "/v1/sandboxes/batch", dict(body, count=n))
    if st != 202:
        raise B.Pending("POST /v1/sandboxes/batch: %s %s" % (st, r))
    for m in r["members"]:
        s.envs.add(m["environment"])
    while True:
        st, v = s.req("GET", "/v1/batches/" + r["batch"]["ID"])
        if st == 200 and v.get("done"):
            break
        time.sleep(0.05)
    took = B.now() - t0
    s.destroy_envs()
    if v["counts"]["healthy"] != n:
        bad = [m for m in v["members"] if m["state"] != "healthy"]
        raise B.Pending("%d of %d batch members not healthy; first: %s" % (len(bad), n, bad[0].get("error")))
    return took


def version_of(s):
    """A healthy version to fork: a sandbox with a file in /work, snapshotted."""
    st, r = s.req("POST", "/v1/sandboxes", {"image": IMAGE, "cmd": ["sleep", "3600"], "timeout_sec": 120})
    B.need(st == 201, "POST /v1/sandboxes: %s %s" % (st, r))
    env = r["environment"]["ID"]
    s.req("POST", "/v1/envs/%s/exec" % env, {"service": "main", "cmd": ["sh", "-c", "echo seed > /work/seed"]})
    st, d = s.req("POST", "/v1/envs/%s/snapshot" % env)
    B.need(st == 202, "snapshot: %s %s" % (st, d))
    dd = s.wait_dep(d["deployment"]["ID"])
    B.need(dd["deployment"]["Status"] == "succeeded", "snapshot: " + s.failed_phase(dd))
    st, e = s.req("GET", "/v1/envs/" + env)
    return env, e["environment"]["CurrentVersionID"]


def body():
    B.fig("batch_20", "batch of %d sandboxes (one call)" % N_IMAGE, "%d parallel POST /v1/sandboxes" % N_IMAGE,
          "s", "ratio<=1")
    B.fig("batch_forks", "batch of %d forks of one version" % N_FORKS,
          "%d parallel from_version sandboxes" % N_FORKS, "s", "ratio<=1")
    why = B.docker_ready()
    if why:
        B.pending("batch_20", why)
        B.pending("batch_forks", why)
        return
    runs = B.runs(3, 1)
    if N_FORKS > 64:
        B.note("batch: the %d parallel single calls run with -max-conns-per-addr 0; under the default "
               "cap of 64 connections per address a third of them are refused, the batch is one call" % N_FORKS)
    try:
        # 100 parallel calls from one address pass denv-cp's default per-address
        # cap (64): the baseline runs without it; a batch needs one connection.
        s = B.Stack("batch", cp_env={"DENV_MAX_CONNS_PER_ADDR": "0"})
    except B.Pending as p:
        B.pending("batch_20", p)
        B.pending("batch_forks", p)
        return
    try:
        img = {"image": IMAGE, "cmd": ["sleep", "3600"]}
        try:
            for _ in range(runs):
                B.base("batch_20", singles(s, N_IMAGE, img))
                B.sample("batch_20", batch(s, N_IMAGE, img))
        except B.Pending as p:
            B.pending("batch_20", p)
        try:
            src, ver = version_of(s)
            for _ in range(runs):
                B.base("batch_forks", singles(s, N_FORKS, {"from_version": ver}))
                B.sample("batch_forks", batch(s, N_FORKS, {"from_version": ver}))
            s.envs.add(src)
        except B.Pending as p:
            B.pending("batch_forks", p)
    finally:
        s.close()


B.main(body)
