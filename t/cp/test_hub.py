"""Integration test of denv-cp's host hub, command pipeline and orchestrator
with a scripted sidecar (t/cp/sidecar.py). Prints TAP; run by t/integ/cp-hub.sh.
"""
import asyncio
import hashlib
import json
import os
import socket
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import cp_harness as T  # noqa: E402  (Server, store seeding)
import tap  # noqa: E402
from sidecar import Sidecar  # noqa: E402
from cp_harness import BOOT_KEY, QUICKSTART, err_of  # noqa: E402
from tap import ok, is_  # noqa: E402

from websockets.asyncio.client import connect  # noqa: E402

PHASES = T.PHASES
SIMPLE = """services:
  app:
    image: busybox:1.36
    command: ["sleep", "infinity"]
    volumes: ["data:/data"]
volumes: { data: {} }
"""
EXPIRED_TOKEN = "djt_expired_token_for_the_hub_test_0123456789"


def call(s, method, path, body=None, **kw):
    return s.call(method, path, body=body, key=BOOT_KEY, **kw)


def wait_until(fn, timeout=10, step=0.05):
    deadline = time.time() + timeout
    while True:
        v = fn()
        if v or time.time() > deadline:
            return v
        time.sleep(step)


def wait_dep(s, dep_id, timeout=10):
    def done():
        st, doc, _ = call(s, "GET", "/v1/deployments/" + dep_id)
        return doc if doc["deployment"]["Status"] not in ("pending", "running") else None
    return wait_until(done, timeout) or call(s, "GET", "/v1/deployments/" + dep_id)[1]


def phase_map(doc):
    return {p["Name"]: p for p in doc["phases"]}


def host_row(s, host_id):
    for h in call(s, "GET", "/v1/hosts")[1]["hosts"]:
        if h["ID"] == host_id:
            return h
    return None


def join_token(s, cloud_id=None):
    st, doc, _ = call(s, "POST", "/v1/join-tokens", {"cloud_id": cloud_id} if cloud_id else {})
    return doc["token"]


def deploy(s, compose, env="alpha", warm=None, project="hub"):
    body = {"env": env, "compose": compose}
    if warm:
        body["warm"] = warm
    st, doc, _ = call(s, "POST", "/v1/projects/%s/deploy" % project, body)
    assert st == 202, (st, doc)
    return doc["deployment"]["ID"], doc["deployment"]["EnvID"]


def events(s, subject):
    return call(s, "GET", "/v1/events?subject=" + subject)[1]["events"]


# ---- the tests ----

def test_join(s, st8):
    tok = join_token(s)
    sc = Sidecar(s.port, token=tok)
    ok(sc.wait_admitted(), "a new sidecar joins with a join token")
    ok(sc.host_id.startswith("host_") and sc.secret.startswith("dhs_"), "hello answer: host_id and a dhs_ secret",
       (sc.host_id, sc.secret[:4]))
    h = wait_until(lambda: host_row(s, sc.host_id))
    ok(h and h["connected"] is True and h["Status"] == "connected" and h["Name"] == "box-1"
       and h["Capabilities"]["storage"] == "dir", "GET /v1/hosts: connected, name and capabilities from hello", h)
    ok(h and "Hash" not in h and sc.secret not in json.dumps(h), "the host's secret hash is never shown")
    st8["sc"] = sc
    st8["secrets"] += [tok, sc.secret]

    again = Sidecar(s.port, token=tok, hostname="box-2")
    is_(again.wait_closed(), (1008, "join: join token already used"), "a used join token: 1008, the spec's message")
    exp = Sidecar(s.port, token=EXPIRED_TOKEN)
    is_(exp.wait_closed(), (1008, "join: join token expired"), "an expired join token: 1008")
    bad = Sidecar(s.port, host_id=sc.host_id, secret="dhs_not_the_secret")
    ok(bad.wait_closed() == (1008, "hello: unknown host or wrong secret"), "a wrong host secret: 1008", bad.closed)
    unk = Sidecar(s.port, token="djt_nope")
    is_(unk.wait_closed()[0], 1008, "an unknown join token: 1008")
    ok(wait_until(lambda: host_row(s, sc.host_id)["connected"]), "refusals leave the joined host connected")


def test_reconnect(s, st8):
    sc = st8["sc"]
    b = Sidecar(s.port, host_id=sc.host_id, secret=sc.secret)
    ok(b.wait_admitted(), "the same host reconnects with its secret")
    ok(wait_until(lambda: sc.closed) == (1008, "replaced by a newer stream of the same host"),
       "the newer stream replaces the older one (closed 1008)", sc.closed)
    h = host_row(s, sc.host_id)
    ok(h["connected"] and h["Status"] == "connected", "still connected through the new stream", h)
    b.stop()
    ok(wait_until(lambda: host_row(s, sc.host_id)["Status"] == "unreachable"), "a dropped stream: unreachable")
    is_(host_row(s, sc.host_id)["connected"], False, "and not connected")
    c = Sidecar(s.port, host_id=sc.host_id, secret=sc.secret)
    ok(c.wait_admitted() and wait_until(lambda: host_row(s, sc.host_id)["connected"]), "back again: connected")
    st8["sc"] = c

    # Grace: a host that says nothing for DENV_HOST_GRACE_SEC (2 s here) is unreachable.
    tok = join_token(s)
    quiet = Sidecar(s.port, token=tok, hostname="quiet", heartbeat=0)
    quiet.wait_admitted()
    ok(wait_until(lambda: host_row(s, quiet.host_id) and host_row(s, quiet.host_id)["Status"] == "unreachable", 6),
       "no heartbeat within the grace window: unreachable")
    quiet.stop_flag = True
    # Heartbeats keep LastSeenAt moving.
    first = host_row(s, c.host_id)["LastSeenAt"]
    ok(wait_until(lambda: host_row(s, c.host_id)["LastSeenAt"] != first, 3), "heartbeats update LastSeenAt")


def test_deploy(s, st8):
    sc = st8["sc"]
    st, doc, _ = call(s, "POST", "/v1/projects", {"name": "hub"})
    dep, env = deploy(s, QUICKSTART)
    st8["env"] = env
    doc = wait_dep(s, dep)
    d = doc["deployment"]
    is_(d["Status"], "succeeded", "deploy on a connected host: succeeded")
    is_([p["Name"] for p in doc["phases"]], PHASES, "the eleven phases in order")
    is_([p["Status"] for p in doc["phases"]],
        ["ok", "ok", "skipped", "skipped", "ok", "ok", "ok", "skipped", "ok", "skipped", "ok"], "phase statuses")
    ph = phase_map(doc)
    is_(set(ph["resolve"]["Evidence"]), {"version", "number", "services", "volumes", "warnings"}, "resolve evidence keys")
    is_(ph["resolve"]["Evidence"]["warnings"], [], "a clean compose file warns of nothing")
    is_((ph["resolve"]["Evidence"]["services"], ph["resolve"]["Evidence"]["volumes"], ph["resolve"]["Evidence"]["number"]),
        (["box", "db"], ["home", "pg"], 1), "resolve evidence values")
    pev = ph["place"]["Evidence"]
    is_((pev["host"], pev["reason"], pev["policy"], [h["host"] for h in pev["hosts"]]),
        (sc.host_id, "spread: largest free share of 1 candidate host", "spread", [sc.host_id]), "place evidence")
    ok(pev["need"] == {"millicpus": 0, "memory_mb": 512, "disk_mb": 1024} and pev["hosts"][0]["fits"],
       "place evidence: the need, and a host that reported no capacity fits", pev)
    is_(ph["provision"]["Evidence"], {"reason": "host already placed"}, "provision skipped: host already placed")
    is_(ph["join"]["Evidence"], {"reason": "host already placed"}, "join skipped")
    ok({"version", "endpoints"} <= set(ph["prepare"]["Evidence"]) and
       ph["prepare"]["Evidence"]["version"] == d["VersionID"], "prepare evidence", ph["prepare"]["Evidence"])
    is_(ph["start"]["Evidence"], {"started_in_ms": 1500}, "start evidence from the env.create result")
    is_(ph["health"]["Evidence"], {"endpoints": {"box": "127.0.0.1:20000", "db": "127.0.0.1:20001"}}, "health evidence")
    is_(ph["warm"]["Evidence"], {"reason": "no warm command"}, "warm skipped without a warm command")
    is_(ph["snapshot"]["Evidence"], {"snapshot": d["VersionID"], "datasets": ["pg", "home"], "frozen_for": "12ms",
                                     "consistent": True}, "snapshot evidence (named after the version)")
    is_(ph["ingress"]["Evidence"], {"endpoints": {"box": "127.0.0.1:20000", "db": "127.0.0.1:20001"},
                                    "names": "pending ingress proxy",
                                    "reason": "the host has no ingress domain (denvd --ingress-domain)"},
       "ingress skipped with its evidence")
    ok(set(ph["verdict"]["Evidence"]) == {"version", "snapshot", "took_ms"}
       and ph["verdict"]["Evidence"]["version"] == d["VersionID"], "verdict evidence", ph["verdict"]["Evidence"])
    ok(all(p["StartedAt"] and p["FinishedAt"] for p in doc["phases"] if p["Status"] == "ok"), "ok phases are timed")
    create = sc.commands("env.create")[-1]
    ok(create[2] == env and create[3]["version"] == d["VersionID"] and create[3]["egress"] == "deny"
       and [x["name"] for x in create[3]["services"]] == ["box", "db"] and create[3]["volumes"] == ["home", "pg"],
       "env.create payload: version, services, volumes, egress; addressed to the env", create)
    st, e, _ = call(s, "GET", "/v1/envs/" + env)
    ok(e["environment"]["Status"] == "running" and e["environment"]["CurrentVersionID"] == d["VersionID"]
       and e["environment"]["HostID"] == sc.host_id and e["connected"] is True
       and e["environment"]["Endpoints"]["box"] == "127.0.0.1:20000", "environment: running, current version, host",
       e)
    st, v, _ = call(s, "GET", "/v1/envs/%s/versions" % env)
    ok(v["versions"][0]["Healthy"] is True and v["versions"][0]["Snapshot"] == d["VersionID"], "version healthy", v)
    kinds = [x["Kind"] for x in events(s, "dep:" + dep)]
    is_(kinds, ["deployment.finished", "deployment.started"], "events on dep:<id>")
    evs = events(s, "env:" + env)
    ok(evs[0]["Body"]["status"] == "succeeded" and "took_ms" in evs[0]["Body"] and evs[0]["Body"]["error"] == ""
       and evs[1]["Body"] == {"kind": "deploy"}, "events on env:<id> with their bodies", evs[:2])
    cmd_id = create[0]
    prog = events(s, "cmd:" + cmd_id)
    ok(prog and prog[0]["Kind"] == "progress" and prog[0]["Body"]["message"] == "working on env.create",
       "progress lines are events on cmd:<id>", prog)
    st8["v1"] = d["VersionID"]

    # warm runs in the first service with a 600 s timeout.
    dep, _ = deploy(s, QUICKSTART, warm=["echo", "warm"])
    doc = wait_dep(s, dep)
    ph = phase_map(doc)
    w = sc.commands("env.exec")[-1][3]
    ok(doc["deployment"]["Status"] == "succeeded" and ph["warm"]["Status"] == "ok" and ph["warm"]["Evidence"] == {"exit": 0}
       and w == {"service": "box", "cmd": ["echo", "warm"], "timeout_sec": 600}, "warm: env.exec in the first service",
       (ph["warm"], w))
    st8["v2"] = doc["deployment"]["VersionID"]
    ok(phase_map(doc)["place"]["Evidence"]["reason"] == "environment already on host", "second deploy: same host")


def test_deploy_failures(s, st8):
    sc = st8["sc"]
    env = st8["env"]
    sc.plan["env.create"] = ["fail:compose up: container db is unhealthy"]
    n_rb = len(sc.commands("env.rollback"))
    dep, _ = deploy(s, QUICKSTART)
    doc = wait_dep(s, dep)
    ph = phase_map(doc)
    is_(doc["deployment"]["Status"], "rolled_back", "a failed deploy with a previous version: rolled_back")
    is_(doc["deployment"]["Error"], "prepare: compose up: container db is unhealthy", "Error is <phase>: <reason>")
    is_([p["Status"] for p in doc["phases"]][4:], ["failed", "skipped", "skipped", "skipped", "skipped", "skipped", "failed"],
        "the failing phase, then skipped up to the verdict")
    is_(ph["verdict"]["Evidence"], {"reverted_to": st8["v2"]}, "verdict: reverted_to the previous version")
    rb = sc.commands("env.rollback")
    ok(len(rb) == n_rb + 1 and rb[-1][3] == {"snapshot": st8["v2"]}, "an env.rollback to that version's snapshot", rb[-1:])
    e = call(s, "GET", "/v1/envs/" + env)[1]["environment"]
    ok(e["CurrentVersionID"] == st8["v2"] and e["Status"] == "running", "the environment stays on its version", e)

    # A failed rollback.
    sc.plan["env.create"] = ["fail:boom"]
    sc.plan["env.rollback"] = ["fail:dataset busy"]
    dep, _ = deploy(s, QUICKSTART)
    doc = wait_dep(s, dep)
    is_((doc["deployment"]["Status"], phase_map(doc)["verdict"]["Evidence"]),
        ("failed", {"reverted": "rollback failed: dataset busy"}), "rollback failed: failed, with the reason")

    # No previous version.
    sc.plan["env.create"] = ["fail:boom"]
    dep, env2 = deploy(s, SIMPLE, env="fresh")
    doc = wait_dep(s, dep)
    is_((doc["deployment"]["Status"], phase_map(doc)["verdict"]["Evidence"]),
        ("failed", {"reverted": "no previous version"}), "no previous version: failed")
    is_(call(s, "GET", "/v1/envs/" + env2)[1]["environment"]["Status"], "failed", "the environment's status is failed")

    # A warm command that exits non-zero fails the warm phase.
    dep, env3 = deploy(s, SIMPLE, env="warmfail", warm=["false"])
    doc = wait_dep(s, dep)
    ph = phase_map(doc)
    ok(ph["warm"]["Status"] == "failed" and ph["warm"]["Evidence"] == {"exit": 1, "stderr": "it failed"}
       and ph["snapshot"]["Status"] == "skipped", "warm exit 1: {exit, stderr}, the rest skipped", ph["warm"])

    # A command that never answers times out (DENV_COMMAND_TIMEOUT_SEC=3 here).
    sc.plan["env.create"] = ["stall"]
    dep, _ = deploy(s, SIMPLE, env="stalled")
    doc = wait_dep(s, dep, timeout=10)
    is_(doc["deployment"]["Error"], "prepare: env.create timed out after 3 s", "a silent host: the phase times out")


def test_drop(s, st8):
    sc = st8["sc"]
    env = st8["env"]
    connects = sc.connects
    sc.plan["env.snapshot"] = ["drop"]
    dep, _ = deploy(s, QUICKSTART)
    doc = wait_dep(s, dep, timeout=15)
    is_(doc["deployment"]["Status"], "succeeded", "a host that drops mid-deployment and returns: the deploy completes")
    snaps = [c for c in sc.commands("env.snapshot") if c[3]["name"] == doc["deployment"]["VersionID"]]
    ok(len(snaps) == 2 and snaps[0][0] == snaps[1][0], "the same command id was sent again after the reconnect",
       [c[0] for c in snaps])
    st8["dropped_cmd"] = snaps[0][0] if snaps else None
    is_(sc.executed.get(snaps[0][0]), 1, "the sidecar ran it once (answered from its log)")
    ok(sc.connects == connects + 1, "one reconnect", sc.connects - connects)
    is_([e["Kind"] for e in events(s, "dep:" + dep)], ["deployment.finished", "deployment.started"],
        "the deployment finished once")

    # One deployment at a time per environment: the second waits.
    sc.plan["env.create"] = ["delay:1"]
    d1, _ = deploy(s, QUICKSTART)
    d2, _ = deploy(s, QUICKSTART)
    time.sleep(0.3)
    st1 = call(s, "GET", "/v1/deployments/" + d1)[1]["deployment"]["Status"]
    st2 = call(s, "GET", "/v1/deployments/" + d2)[1]["deployment"]["Status"]
    is_((st1, st2), ("running", "pending"), "a second deploy of the same environment queues")
    a, b = wait_dep(s, d1), wait_dep(s, d2)
    ok(a["deployment"]["Status"] == b["deployment"]["Status"] == "succeeded"
       and a["deployment"]["FinishedAt"] <= b["phases"][0]["StartedAt"], "and runs after the first",
       (a["deployment"]["FinishedAt"], b["phases"][0]["StartedAt"]))
    st8["v_cur"] = b["deployment"]["VersionID"]


def test_kinds(s, st8):
    sc = st8["sc"]
    env = st8["env"]
    # snapshot
    st, doc, _ = call(s, "POST", "/v1/envs/%s/snapshot" % env)
    ok(st == 202 and doc["deployment"]["Kind"] == "snapshot" and doc["deployment"]["VersionID"], "snapshot: 202", doc)
    vid = doc["deployment"]["VersionID"]
    doc = wait_dep(s, doc["deployment"]["ID"])
    ph = phase_map(doc)
    ok(doc["deployment"]["Status"] == "succeeded" and [p["Name"] for p in doc["phases"]] == ["snapshot", "health", "verdict"],
       "snapshot: phases in order", doc)
    is_(set(ph["snapshot"]["Evidence"]), {"snapshot", "datasets", "frozen_for", "consistent"}, "snapshot evidence keys")
    is_(ph["health"]["Evidence"], {"answered": True}, "health: answered (true ran in the first service)")
    is_(set(ph["verdict"]["Evidence"]), {"version", "snapshot", "took_ms"}, "snapshot verdict evidence keys")
    is_(sc.commands("env.exec")[-1][3]["cmd"], ["true"], "health ran `true`")
    is_(call(s, "GET", "/v1/envs/" + env)[1]["environment"]["CurrentVersionID"], vid, "the snapshot is the current version")
    st8["snap"] = vid
    # a failing snapshot keeps the current version
    sc.plan["env.snapshot"] = ["fail:zfs: dataset is busy"]
    st, doc, _ = call(s, "POST", "/v1/envs/%s/snapshot" % env)
    doc = wait_dep(s, doc["deployment"]["ID"])
    ph = phase_map(doc)
    ok(doc["deployment"]["Status"] == "failed" and ph["health"]["Status"] == "skipped"
       and ph["verdict"]["Evidence"] == {"kept": vid}, "a failed snapshot: verdict {kept}", doc["phases"])

    # fork
    st, doc, _ = call(s, "POST", "/v1/envs/%s/fork" % env, {"name": "rollout-01"})
    ok(st == 202 and doc["deployment"]["Kind"] == "fork" and doc["deployment"]["EnvID"] != env, "fork: 202", doc)
    fork_env = doc["deployment"]["EnvID"]
    doc = wait_dep(s, doc["deployment"]["ID"])
    ph = phase_map(doc)
    ok(doc["deployment"]["Status"] == "succeeded" and [p["Name"] for p in doc["phases"]] == ["place", "clone", "health", "verdict"],
       "fork: phases in order", doc)
    is_(ph["place"]["Evidence"], {"host": sc.host_id, "reason": "same host as source snapshot"}, "fork place evidence")
    is_(ph["clone"]["Evidence"], {"forked_in_ms": 900, "from": vid}, "fork clone evidence")
    is_(ph["health"]["Evidence"], {"endpoints": {"box": "127.0.0.1:21000"}}, "fork health evidence")
    is_(set(ph["verdict"]["Evidence"]), {"env", "took_ms"}, "fork verdict evidence keys")
    fk = sc.commands("env.fork")[-1]
    ok(fk[2] == fork_env and fk[3]["from_env"] == env and fk[3]["from_snapshot"] == vid, "env.fork to the new env", fk)
    e = call(s, "GET", "/v1/envs/" + fork_env)[1]["environment"]
    ok(e["Name"] == "rollout-01" and e["Stage"] == "fork" and e["ParentVersionID"] == vid and e["CurrentVersionID"] == vid
       and e["Status"] == "running", "the fork: stage, parent and current version", e)
    st, doc, _ = call(s, "POST", "/v1/envs/%s/fork" % env, {"name": "rollout-01"})
    is_(st, 409, "fork to an existing name: 409")
    st, doc, _ = call(s, "POST", "/v1/envs/%s/fork" % env, {"version": "ver_nope"})
    is_(st, 400, "fork of an unknown version: 400")

    # rollback
    st, doc, _ = call(s, "POST", "/v1/envs/%s/rollback" % env, {"version": st8["v1"]})
    is_(st, 202, "rollback: 202")
    doc = wait_dep(s, doc["deployment"]["ID"])
    ph = phase_map(doc)
    ok(doc["deployment"]["Status"] == "succeeded" and [p["Name"] for p in doc["phases"]] == ["restore", "health", "verdict"],
       "rollback: phases in order", doc)
    is_((ph["restore"]["Evidence"], ph["health"]["Evidence"], ph["verdict"]["Evidence"]),
        ({"snapshot": st8["v1"]}, {"restored": st8["v1"]}, {"version": st8["v1"]}), "rollback evidence")
    is_(call(s, "GET", "/v1/envs/" + env)[1]["environment"]["CurrentVersionID"], st8["v1"], "rolled back to v1")
    st, doc, _ = call(s, "POST", "/v1/envs/%s/rollback" % env, {"version": fork_env})
    is_(st, 400, "rollback to something that is not a version of this env: 400")

    # verify
    st, doc, _ = call(s, "POST", "/v1/envs/%s/verify" % env, {})
    is_(st, 202, "verify: 202")
    capture = doc["deployment"]["VersionID"]
    doc = wait_dep(s, doc["deployment"]["ID"])
    ph = phase_map(doc)
    ok(doc["deployment"]["Status"] == "succeeded" and
       [p["Name"] for p in doc["phases"]] == ["stop", "collect", "snapshot", "clone", "grade", "verdict"],
       "verify: phases in order", doc)
    is_(ph["stop"]["Evidence"], {"agent_service": "box", "mode": "pause"}, "stop evidence")
    is_(ph["collect"]["Evidence"], {"files": 1, "bytes": 3, "missing": [], "refused": []}, "collect evidence")
    is_(set(ph["clone"]["Evidence"]), {"grader_env", "forked_in_ms"}, "clone evidence keys")
    is_(ph["grade"]["Evidence"], {"reward": 1, "exit_code": 0, "stdout": "ok", "stderr": "", "source": "reward.txt",
                                  "ran_for": "1s"}, "grade evidence")
    v = ph["verdict"]["Evidence"]
    ok(v["reward"] == 1 and v["source"] == "reward.txt" and v["refused"] == [] and v["missing"] == []
       and v["agent_frozen"] is True and "took_ms" in v and v["exit_code"] == 0, "verify verdict evidence", v)
    grader = ph["clone"]["Evidence"]["grader_env"]
    snap = sc.commands("env.snapshot")[-1][3]
    is_(snap, {"name": capture, "keep_paused": ["box"], "refuse": True},
        "the capture snapshot keeps the agent paused and turns a fault of the volumes into a refusal")
    run = sc.commands("verify.run")[-1]
    ok(run[2] == grader and run[3]["refused"] is False and run[3]["verifier"]["image"] == "busybox:1.36",
       "verify.run on the grader's fork", run)
    ok(wait_until(lambda: any(c[2] == grader for c in sc.commands("env.destroy"))), "the grader's fork is destroyed")
    ge = call(s, "GET", "/v1/envs/" + grader)[1]["environment"]
    ok(ge["Stage"] == "verify" and ge["Name"].startswith("alpha-verify-"), "grader env: stage verify, named <env>-verify-", ge)
    vs = {x["ID"]: x for x in call(s, "GET", "/v1/envs/%s/versions" % env)[1]["versions"]}
    ok(vs[capture]["Healthy"] is True, "the capture version is healthy")
    is_(call(s, "GET", "/v1/envs/" + env)[1]["environment"]["CurrentVersionID"], st8["v1"], "the env keeps its version")
    st, doc, _ = call(s, "POST", "/v1/envs/%s/verify" % fork_env, {})
    ok(st == 202, "verify of the fork (same spec) is accepted", (st, doc))
    wait_dep(s, doc["deployment"]["ID"])
    # verify needs agent + verifier
    dep, env_simple = deploy(s, SIMPLE, env="simple")
    wait_dep(s, dep)
    st, doc, _ = call(s, "POST", "/v1/envs/%s/verify" % env_simple, {})
    is_(st, 400, "verify without x-denv.agent/verifier: 400")

    # destroy
    st, doc, _ = call(s, "DELETE", "/v1/envs/" + fork_env)
    ok(st == 202 and set(doc) == {"deployment"} and doc["deployment"]["Kind"] == "destroy", "DELETE: 202 {deployment}", doc)
    doc = wait_dep(s, doc["deployment"]["ID"])
    ok(doc["deployment"]["Status"] == "succeeded" and [p["Status"] for p in doc["phases"]] == ["ok", "ok"]
       and doc["phases"][0]["Evidence"] is None and doc["phases"][1]["Evidence"] is None, "destroy phases", doc["phases"])
    is_(call(s, "GET", "/v1/envs/" + fork_env)[1]["environment"]["Status"], "destroyed", "the fork is destroyed")
    ok(sc.commands("env.destroy")[-1][2] == fork_env, "env.destroy sent to it")
    st, doc, _ = call(s, "POST", "/v1/envs/%s/exec" % fork_env, {"service": "box", "cmd": ["true"]})
    is_(st, 409, "a destroyed environment takes no commands")


def test_exec_files(s, st8):
    sc = st8["sc"]
    env = st8["env"]
    st, doc, _ = call(s, "POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": ["echo", "hi"]})
    is_((st, doc), (200, {"exit_code": 0, "stdout": "hi\n", "stderr": ""}), "exec: 200 {exit_code, stdout, stderr}")
    is_(sc.commands("env.exec")[-1][3], {"service": "box", "cmd": ["echo", "hi"], "timeout_sec": 120},
        "env.exec payload with the default timeout")
    st, doc, _ = call(s, "POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": ["false"], "timeout_sec": 5})
    is_((st, doc["exit_code"]), (200, 1), "a non-zero exit is still 200")
    sc.plan["env.exec"] = ["fail:service \"nope\" is not running"]
    st, doc, _ = call(s, "POST", "/v1/envs/%s/exec" % env, {"service": "nope", "cmd": ["true"]})
    is_((st, err_of(doc)), (502, 'service "nope" is not running'), "the host could not run it: 502")
    st, doc, _ = call(s, "POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": []})
    is_(st, 400, "exec with an empty cmd: 400")

    small = os.urandom(1000)
    st, doc, _ = call(s, "PUT", "/v1/envs/%s/files?service=box&path=/home/agent/in" % env, raw=small,
                      headers={"Content-Type": "application/x-tar"})
    is_((st, doc), (200, {"ok": True, "bytes": 1000}), "PUT files: {ok, bytes}")
    put = sc.commands("env.put")[-1][3]
    is_(put, {"service": "box", "path": "/home/agent/in", "tar_bytes": 1000,
              "tar_sha256": hashlib.sha256(small).hexdigest(), "tar_chunks": 1},
        "env.put payload: tar_bytes, tar_sha256, tar_chunks (the archive went in a chunk before it)")
    st, body, h = call(s, "GET", "/v1/envs/%s/files?service=box&path=/home/agent/in" % env)
    ok(st == 200 and body == small and h.get("content-type") == "application/x-tar", "GET files: the same bytes back")
    st, doc, _ = call(s, "PUT", "/v1/envs/%s/files?service=box&target=/home/agent/t&owner=agent:staff" % env,
                      raw=small, headers={"Content-Type": "application/x-tar"})
    is_((st, doc), (200, {"ok": True, "bytes": 1000, "path": "/home/agent/t/landed", "owner": "1000:1000"}),
        "PUT files with target and owner: where it landed and whose it is")
    put = sc.commands("env.put")[-1][3]
    ok(put.get("target") == "/home/agent/t" and put.get("owner") == "agent:staff" and "path" not in put,
       "env.put payload: target and owner", put)
    for q, what in (("path=/a&target=/b", "both path and target"), ("", "neither path nor target"),
                    ("path=/a&owner=", "an empty owner")):
        st, doc, _ = call(s, "PUT", "/v1/envs/%s/files?service=box&%s" % (env, q), raw=small,
                          headers={"Content-Type": "application/x-tar"})
        is_(st, 400, "PUT files with %s: 400 (%s)" % (what, err_of(doc)))

    big = os.urandom(30 << 20)
    t0 = time.time()
    st, doc, _ = call(s, "PUT", "/v1/envs/%s/files?service=box&path=/big" % env, raw=big,
                      headers={"Content-Type": "application/x-tar"})
    is_((st, doc), (200, {"ok": True, "bytes": 30 << 20}), "PUT a 30 MiB archive")
    put = sc.commands("env.put")[-1][3]
    ok(put.get("tar_chunks") == 30 and put.get("tar_bytes") == 30 << 20 and len(sc.put_chunks) == 30,
       "it went to the sidecar in 30 chunks of 1 MiB", put)
    st, body, _ = call(s, "GET", "/v1/envs/%s/files?service=box&path=/big" % env)
    ok(st == 200 and isinstance(body, bytes) and len(body) == len(big) and body == big,
       "GET the 30 MiB archive back through chunks (%.1f s round trip)" % (time.time() - t0))
    st = T.status_of_big(s, "PUT", "/v1/envs/%s/files?service=box&path=/x" % env, b"x" * ((32 << 20) + 1), BOOT_KEY)
    is_(st, 413, "an archive over 32 MiB: 413")
    st, doc, _ = call(s, "PUT", "/v1/envs/%s/files?service=box&path=/empty" % env, raw=b"",
                      headers={"Content-Type": "application/x-tar"})
    ok(st == 200 and sc.commands("env.put")[-1][3]["tar_chunks"] == 1 and len(sc.put_chunks) == 1
       and sc.put_chunks[0]["data"] == "" and sc.put_chunks[0]["last"] is True,
       "an empty archive is one empty chunk with last true", (st, doc))
    sc.plan["env.get"] = ["badsha"]
    st, doc, _ = call(s, "GET", "/v1/envs/%s/files?service=box&path=/home/agent/in" % env)
    is_((st, err_of(doc)), (502, "env.get: archive sha256 mismatch"), "a get whose sha256 does not match: 502")
    st, doc, _ = call(s, "GET", "/v1/envs/%s/files?service=box&path=/missing" % env)
    is_((st, err_of(doc)), (502, "docker cp: /missing: no such file or directory"), "a missing path: 502 with the host's error")
    st, doc, _ = call(s, "GET", "/v1/envs/%s/files?service=box" % env)
    is_(st, 400, "files without path: 400")


def test_sandboxes(s, st8):
    sc = st8["sc"]
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "python:3.12-slim", "cmd": ["sleep", "infinity"]})
    ok(st == 201 and set(doc) == {"environment", "deployment", "expires_at", "idle_expires_at"}
       and doc["deployment"]["Status"] == "succeeded"
       and doc["environment"]["Status"] == "running" and doc["environment"]["Name"].startswith("sbx-"),
       "POST /v1/sandboxes (image): 201 when healthy", (st, doc))
    create = sc.commands("env.create")[-1][3]
    ok(create["services"][0]["name"] == "main" and create["services"][0]["image"] == "python:3.12-slim"
       and create["services"][0]["command"] == ["sleep", "infinity"] and create["volumes"] == ["work"]
       and create["services"][0]["volumes"] == ["work:/work"] and create["egress"] == "deny",
       "one service \"main\", /work persisted, egress deny", create)
    projects = [p["Name"] for p in call(s, "GET", "/v1/projects")[1]["projects"]]
    ok("sandboxes" in projects, "project \"sandboxes\" created on demand", projects)
    sbx = doc["environment"]
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "bad:image"})
    ok(st == 502 and "pull access denied" in err_of(doc), "a sandbox whose deployment fails: 502", (st, doc))
    sc.plan["env.create"] = ["stall"]
    t0 = time.time()
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "slow:image", "timeout_sec": 1})
    ok(st == 504 and time.time() - t0 < 4, "a sandbox not healthy within timeout_sec: 504", (st, doc))
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {})
    is_(st, 400, "neither image nor from_version: 400")
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "x", "ports": ["http"]})
    ok(st == 400 and "is not a port number" in err_of(doc), "a port that is not a port number: 400", (st, doc))
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "x", "ports": ["70000"]})
    is_(st, 400, "a port over 65535: 400")
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "x", "ports": [8080]})
    is_(st, 400, "ports must be strings: 400")

    # from_version: fork a healthy version.
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"from_version": st8["v1"], "name": "episode-1"})
    ok(st == 201 and doc["environment"]["Name"] == "episode-1" and doc["environment"]["ParentVersionID"] == st8["v1"]
       and doc["deployment"]["Kind"] == "fork", "POST /v1/sandboxes (from_version): 201 with the fork", (st, doc))
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"from_version": "ver_nope"})
    is_(st, 400, "from_version of an unknown version: 400")

    # Pinned to a target: a sidecar joined through the cloud named "lab".
    st, cl, _ = call(s, "POST", "/v1/clouds", {"provider": "manual", "name": "lab"})
    tok = join_token(s, cl["cloud"]["ID"])
    lab = Sidecar(s.port, token=tok, hostname="lab-1")
    lab.wait_admitted()
    st8["lab"] = lab
    st, doc, _ = call(s, "POST", "/v1/targets/lab/sandboxes", {"image": "busybox:1.36"})
    ok(st == 201 and doc.get("target") == "lab" and doc["environment"]["HostID"] == lab.host_id,
       "POST /v1/targets/{name}/sandboxes: placed on the target's host", (st, doc))
    ok(phase_map(wait_dep(s, doc["deployment"]["ID"]))["place"]["Evidence"] == {"host": lab.host_id, "reason": "target lab"},
       "place evidence names the target")
    st, doc, _ = call(s, "POST", "/v1/targets/nope/sandboxes", {"image": "busybox:1.36"})
    is_(st, 404, "an unknown target: 404")
    st, doc, _ = call(s, "POST", "/v1/targets/lab/sandboxes", {"from_version": st8["v1"]})
    is_(st, 400, "a target sandbox takes the image form only")
    lab.stop()
    wait_until(lambda: not host_row(s, lab.host_id)["connected"])
    st, doc, _ = call(s, "POST", "/v1/targets/lab/sandboxes", {"image": "busybox:1.36"})
    ok(st == 502 and 'target "lab" (manual): no connected host' in err_of(doc), "target without a connected host: 502",
       (st, doc))
    # Destroy with the host gone: teardown skipped.
    st, doc, _ = call(s, "GET", "/v1/projects/sandboxes/envs")
    on_lab = [e for e in doc["environments"] if e["HostID"] == lab.host_id][0]
    st, doc, _ = call(s, "DELETE", "/v1/envs/" + on_lab["ID"])
    doc = wait_dep(s, doc["deployment"]["ID"])
    is_((doc["phases"][0]["Status"], doc["phases"][0]["Evidence"]),
        ("skipped", {"reason": "host not connected; datasets left in place"}), "destroy on an unreachable host")


def test_event_stream(s, st8):
    env = st8["env"]
    got = []

    async def listen():
        async with connect("ws://127.0.0.1:%d/v1/events/stream?subject=env:%s" % (s.port, env),
                           additional_headers={"Authorization": "Bearer " + BOOT_KEY}) as ws:
            await asyncio.sleep(0.2)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, lambda: deploy(s, QUICKSTART))
            deadline = time.time() + 10
            while time.time() < deadline and not any(e["Kind"] == "deployment.finished" for e in got):
                try:
                    got.append(json.loads(await asyncio.wait_for(ws.recv(), 1)))
                except asyncio.TimeoutError:
                    pass

    asyncio.run(listen())
    kinds = [e["Kind"] for e in got]
    ok(kinds[:1] == ["deployment.started"] and "deployment.finished" in kinds, "GET /v1/events/stream pushes the env's events", kinds)
    ok(all(e["Subject"] == "env:" + env for e in got), "only the subject asked for")

    async def unauth():
        try:
            async with connect("ws://127.0.0.1:%d/v1/events/stream" % s.port):
                return None
        except Exception as ex:  # InvalidStatus
            return getattr(getattr(ex, "response", None), "status_code", None)
    is_(asyncio.run(unauth()), 401, "the event stream needs a key")


UPGRADE = (b"GET /v1/hosts/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
HUB_MAX_PENDING = 256   # CP_HUB_MAX_PENDING


def upgrade_silent(port):
    """A host stream that never says hello: the 101 read, then nothing."""
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    c.sendall(UPGRADE)
    got = b""
    while b"\r\n\r\n" not in got:
        d = c.recv(4096)
        if not d:
            break
        got += d
    return c, got.startswith(b"HTTP/1.1 101 ")


def dropped(c, timeout=2.0):
    c.settimeout(timeout)
    try:
        return c.recv(4096) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_hub_budget(s, st8):
    """Streams waiting for their hello are capped; the oldest gives way, so a
    real sidecar still joins when the cap is full of silent streams."""
    socks = []
    try:
        for _ in range(HUB_MAX_PENDING):
            c, up = upgrade_silent(s.port)
            socks.append(c)
            if not up:
                break
        ok(len(socks) == HUB_MAX_PENDING, "%d silent host streams upgraded" % len(socks))
        c, up = upgrade_silent(s.port)
        socks.append(c)
        ok(up and dropped(socks[0]), "one more: upgraded, and the longest-waiting silent stream is dropped")
        ok(not dropped(socks[1], 0.2), "  the next oldest is still open")
        sc = Sidecar(s.port, token=join_token(s), hostname="budget")
        ok(sc.wait_admitted() and wait_until(lambda: (host_row(s, sc.host_id) or {}).get("connected")),
           "a real sidecar joins with the pending streams full (its stream pushes out the next oldest)")
        ok(dropped(socks[1]), "  which was the next oldest")
        sc.stop()
    finally:
        for c in socks:
            c.close()


def read_log(store):
    """Every op of the store's log, in order (the format of store.h); with
    PostgreSQL only the rows as they are now."""
    import struct
    if T.PG_DSN:
        return T.pg_rows(store)
    with open(os.path.join(store, "log"), "rb") as f:
        data = f.read()
    ops, off = [], 16
    while off + 8 <= len(data):
        n, _ = struct.unpack_from("<II", data, off)
        if off + 8 + n > len(data):
            break
        ops += json.loads(data[off + 8:off + 8 + n])["ops"]
        off += 8 + n
    return ops


def test_command_rows(store, st8):
    """The commands table: each command's row goes sent -> acked -> ok; the
    dropped command has one row although it was sent twice."""
    ops = [o for o in read_log(store) if o.get("put") == "commands"]
    cid = st8.get("dropped_cmd")
    rows = [o["row"] for o in ops if o["id"] == cid]
    if T.PG_DSN:
        # No history on the server, only each row's last state.
        ok(len(rows) == 1 and rows[0]["Status"] == "ok" and rows[0]["Kind"] == "env.snapshot"
           and rows[0]["HostID"] == st8["sc"].host_id and rows[0]["Result"]["snapshot"] and rows[0]["FinishedAt"],
           "the re-sent command has one row, ok, with its kind, host and result", rows)
        put = [o["row"] for o in ops if o["row"]["Kind"] == "env.put" and o["row"]["Payload"].get("tar_chunks") == 30]
        ok(put and "omitted_bytes" not in put[0]["Payload"] and put[0]["Payload"]["tar_bytes"] == 30 << 20,
           "a chunked put's row keeps its payload without the archive", put[:1] and put[0]["Payload"])
        return
    is_([r["Status"] for r in rows][:1] + [r["Status"] for r in rows][-1:], ["sent", "ok"],
        "the re-sent command's row: first sent, last ok")
    ok(rows and rows[0]["Kind"] == "env.snapshot" and rows[0]["HostID"] == st8["sc"].host_id
       and rows[-1]["Result"]["snapshot"] and rows[-1]["FinishedAt"], "its row: kind, host, result", rows[-1:])
    firsts = {}
    for o in ops:
        firsts.setdefault(o["id"], o["row"]["Status"])
    ok(firsts and all(v == "sent" for v in firsts.values()), "every command row starts as sent",
       [k for k, v in firsts.items() if v != "sent"][:3])
    put = [o["row"] for o in ops if o["row"]["Kind"] == "env.put" and o["row"]["Payload"].get("tar_chunks") == 30]
    ok(put and "omitted_bytes" not in put[0]["Payload"] and put[0]["Payload"]["tar_bytes"] == 30 << 20,
       "a chunked put's row keeps its payload without the archive", put[:1] and put[0]["Payload"])


def seed_expired_token(store, team_id):
    h = hashlib.sha256(EXPIRED_TOKEN.encode()).hexdigest()
    T.append_records(store, [[{"put": "join_tokens", "id": "jtok_expired", "row": {
        "ID": "jtok_expired", "TeamID": team_id, "CloudID": "", "Hash": h, "CreatedAt": "2020-01-01T00:00:00Z",
        "ExpiresAt": "2020-01-01T01:00:00Z", "UsedAt": None}}]])


def main():
    if not os.access(T.BIN, os.X_OK):
        print("1..0 # SKIP %s is not built" % T.BIN)
        return 0
    tmp = tempfile.mkdtemp(prefix="denv-cp-hub-")
    store = os.path.join(tmp, "store")
    env = {"DENV_BOOTSTRAP_KEY": BOOT_KEY, "DENV_TEAM": "acme", "DENV_HOST_GRACE_SEC": "2",
           "DENV_COMMAND_TIMEOUT_SEC": "3"}
    st8 = {"secrets": []}
    s = None
    try:
        s = T.Server(store, env)
        team = call(s, "GET", "/v1/me")[1]["team"]["ID"]
        s.stop()
        seed_expired_token(store, team)
        s = T.Server(store, env)
        for t in (test_join, test_reconnect, test_deploy, test_deploy_failures, test_drop, test_kinds,
                  test_exec_files, test_sandboxes, test_event_stream, test_hub_budget):
            t(s, st8)
        st8["sc"].stop()
        is_(s.stop(), 0, "SIGTERM with host streams open: exit 0")
        log = s.stderr()
        is_([x[:8] for x in st8["secrets"] if x in log], [], "no join token or host secret in the log (-v)")
        if T.PG_DSN:
            raw = json.dumps(T.pg_rows(store)).encode()
        else:
            raw = open(os.path.join(store, "log"), "rb").read()
        is_([x[:8] for x in st8["secrets"] if x.encode() in raw], [], "nor in the store (hashes only)")
        test_command_rows(store, st8)
        # A restart: nothing is connected until the sidecar comes back.
        s = T.Server(store, env)
        h = host_row(s, st8["sc"].host_id)
        ok(h["Status"] == "unreachable" and h["connected"] is False, "after a restart the host is unreachable", h)
        back = Sidecar(s.port, host_id=st8["sc"].host_id, secret=st8["sc"].secret)
        ok(back.wait_admitted() and wait_until(lambda: host_row(s, back.host_id)["connected"]),
           "after a restart the host reconnects with its secret")
        st, doc, _ = call(s, "POST", "/v1/envs/%s/exec" % st8["env"], {"service": "box", "cmd": ["echo", "back"]})
        is_((st, doc.get("stdout")), (200, "back\n"), "and takes commands again")
        back.stop()
        is_(s.stop(), 0, "exit 0")
        s = None
    except Exception:
        ok(False, "test run raised", traceback.format_exc())
        if s is not None:
            print("# denv-cp stderr tail:")
            for line in s.stderr().splitlines()[-25:]:
                print("#   " + line)
            s.proc.kill()
    return tap.finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
