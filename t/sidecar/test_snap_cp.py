"""Snapshot, fork and rollback deployments through the REAL control plane
(bin/denv-cp) and denvd: a quickstart deploy reaches verdict succeeded with
the snapshot phase's evidence; a row written after it is captured by a
snapshot deployment; a fork deployment of that version sees the row; a
rollback deployment to the deploy's version removes it; destroys leave
nothing behind."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import TAP, docker_leftovers, remove_project  # noqa: E402
from realcp import QUICKSTART as COMPOSE, RealCP  # noqa: E402

top, tmp = sys.argv[1], sys.argv[2]
extra = sys.argv[3:]
t = TAP()
rcp = RealCP(top, tmp, 19500)
cp, req = rcp.proc, rcp.req
PG = ["psql", "-U", "postgres", "-h", "/run/postgresql", "-v", "ON_ERROR_STOP=1", "-qAt"]


def wait_dep(st, r, limit=240):
    if st != 202:
        return {"error": (st, r)}
    return rcp.wait_dep(r["deployment"]["ID"], limit)


def phases(dd):
    return {p["Name"]: p for p in dd.get("phases", [])}


def summary(dd):
    return ", ".join("%s=%s" % (p["Name"], p["Status"]) for p in dd.get("phases", []))


def sql(env, q):
    st, r = req("POST", "/v1/envs/%s/exec" % env, {"service": "db", "cmd": PG + ["-c", q]})
    return r.get("stdout", "").strip() if st == 200 and isinstance(r, dict) else "<%s %s>" % (st, r)


d = None
envs = []
try:
    rcp.wait_up()
    st, tok = req("POST", "/v1/join-tokens", {})
    d = rcp.start_denvd(tok["token"], extra)
    hosts = rcp.wait_connected()
    t.ok(hosts and hosts[0].get("connected"), "the host joins (storage %s)"
         % (hosts[0].get("Capabilities", {}).get("storage") if hosts else None), hosts)
    req("POST", "/v1/projects", {"name": "qs"})
    t0 = time.time()
    dd = wait_dep(*req("POST", "/v1/projects/qs/deploy", {"compose": COMPOSE}))
    env = dd.get("deployment", {}).get("EnvID")
    envs.append(env)
    ph = phases(dd)
    t.diag("deploy: %.1f s; %s" % (time.time() - t0, summary(dd)))
    snap = (ph.get("snapshot") or {}).get("Evidence") or {}
    t.diag("snapshot evidence: %s" % json.dumps(snap))
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and ph.get("verdict", {}).get("Status") == "ok",
         "the quickstart deploy reaches verdict succeeded", (dd, open(tmp + "/denvd.log").read()[-2000:]))
    v1 = dd.get("deployment", {}).get("VersionID")
    t.ok(snap.get("snapshot") == v1 and len(snap.get("datasets", [])) == 2 and snap.get("consistent") is True
         and snap.get("frozen_for"), "snapshot phase evidence {snapshot, datasets, frozen_for, consistent}", snap)

    sql(env, "CREATE TABLE t (x text); INSERT INTO t VALUES ('row-after-deploy')")
    dd = wait_dep(*req("POST", "/v1/envs/%s/snapshot" % env, {}))
    ph = phases(dd)
    v2 = dd.get("deployment", {}).get("VersionID")
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and
         (ph.get("snapshot") or {}).get("Evidence", {}).get("snapshot") == v2 and
         (ph.get("health") or {}).get("Evidence", {}).get("answered") is True,
         "a snapshot deployment succeeds (%s)" % summary(dd), dd)

    t0 = time.time()
    dd = wait_dep(*req("POST", "/v1/envs/%s/fork" % env, {"version": v2, "name": "f1"}))
    fork = dd.get("deployment", {}).get("EnvID")
    envs.append(fork)
    ph = phases(dd)
    t.diag("fork deployment: %.1f s; clone %s" % (time.time() - t0, (ph.get("clone") or {}).get("Evidence")))
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and
         (ph.get("clone") or {}).get("Evidence", {}).get("forked_in_ms", 0) > 0,
         "a fork deployment succeeds (%s)" % summary(dd), dd)
    cev = (ph.get("clone") or {}).get("Evidence", {})
    t.ok(set(cev.get("timings", {})) >= {"prepare_ms", "start_ms", "health_ms"} and
         all(r.get("test") in ("running", "postgres", "redis", "exec", "docker") for r in cev.get("readiness", [])) and
         cev.get("readiness"), "the clone's evidence has the fork's timings and readiness", cev)
    t.ok(sql(fork, "SELECT x FROM t") == "row-after-deploy", "the fork sees the row of the snapshot")
    sql(fork, "INSERT INTO t VALUES ('fork-row')")
    t.ok(sql(env, "SELECT string_agg(x, ',') FROM t") == "row-after-deploy", "the fork's write is not in the parent")

    dd = wait_dep(*req("POST", "/v1/envs/%s/rollback" % env, {"version": v1}))
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded", "a rollback deployment succeeds (%s)" % summary(dd), dd)
    t.ok(sql(env, "SELECT count(*) FROM pg_tables WHERE tablename = 't'") == "0",
         "after the rollback the table written after the deploy is gone")
    t.ok(sql(fork, "SELECT string_agg(x, ',' ORDER BY x) FROM t") == "fork-row,row-after-deploy",
         "the fork is untouched by the parent's rollback")

    for e in (env, fork):
        dd = wait_dep(*req("DELETE", "/v1/envs/%s" % e))
    left = [e for e in envs if e and any(docker_leftovers(e.lower()))]
    snaps = os.path.join(tmp, "data", "snaps")
    t.ok(not left and not os.listdir(os.path.join(tmp, "data", "envs")) and
         (not os.path.exists(snaps) or not os.listdir(snaps)), "destroys leave nothing behind",
         (left, os.listdir(os.path.join(tmp, "data", "envs")), os.listdir(snaps) if os.path.exists(snaps) else None))
finally:
    if d:
        d.kill()
        d.wait()
    cp.kill()
    cp.wait()
    for e in envs:
        if e:
            remove_project(e.lower())
sys.exit(t.done())
