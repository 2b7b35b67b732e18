"""Integration test of denv-cp's per-team quotas and Idempotency-Key
(denv-cp(8), "Quotas" and "Idempotency-Key") with a scripted sidecar
(t/cp/sidecar.py). Prints TAP; run by t/integ/cp-policy.sh.
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import cp_harness as T  # noqa: E402  (Server, store seeding)
import tap  # noqa: E402
from sidecar import Sidecar  # noqa: E402
from cp_harness import BOOT_KEY, err_of  # noqa: E402
from tap import ok, is_  # noqa: E402

FLAGS = ["-max-envs", "4", "-max-sandboxes", "2", "-max-exec", "2"]
ENV = {"DENV_BOOTSTRAP_KEY": BOOT_KEY, "DENV_TEAM": "acme", "DENV_DEV_LOGIN": "1"}


def call(s, method, path, body=None, key=BOOT_KEY, idem=None, headers=None):
    h = dict(headers or {})
    if idem is not None:
        h["Idempotency-Key"] = idem
    return s.call(method, path, body=body, key=key, headers=h)


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
    return wait_until(done, timeout)


def quotas(s, team, key=BOOT_KEY):
    return call(s, "GET", "/v1/teams/%s/quotas" % team, key=key)


def in_thread(fn, *a):
    out = {}

    def run():
        out["r"] = fn(*a)
    t = threading.Thread(target=run)
    t.start()
    return t, out


def test_flags():
    r = subprocess.run([T.BIN, "--help"], capture_output=True, text=True)
    ok(all(f in r.stdout for f in ("-max-envs", "-max-sandboxes", "-max-exec", "-idempotency-ttl")),
       "--help documents the quota flags and -idempotency-ttl")
    r = subprocess.run([T.BIN, "-max-envs", "-1"], capture_output=True, text=True)
    ok(r.returncode == 2 and "-max-envs: want a number from 0 (no limit)" in r.stderr,
       "-max-envs -1 is refused (exit 2)", (r.returncode, r.stderr))
    r = subprocess.run([T.BIN, "-idempotency-ttl", "forever"], capture_output=True, text=True)
    ok(r.returncode == 2 and "-idempotency-ttl: want a duration" in r.stderr, "a bad -idempotency-ttl is refused",
       r.stderr)


def second_team(s):
    """A dev-login user's personal team and a dak_ key of it."""
    st, doc, _ = s.call("POST", "/auth/dev-login", body={"email": "eve@example.com"})
    sess = doc["token"]
    st, doc, _ = call(s, "POST", "/v1/keys", {"name": "eve"}, key=sess)
    key = doc["api_key"]
    team = call(s, "GET", "/v1/me", key=key)[1]["team"]["ID"]
    return sess, key, team


def test_idem_projects(s, st8):
    st, a, h = call(s, "POST", "/v1/projects", {"name": "p1"}, idem="k-p1")
    ok(st == 201 and "idempotent-replayed" not in h, "POST /v1/projects with an Idempotency-Key: 201", (st, a))
    st8["p1"] = a
    st, b, h = call(s, "POST", "/v1/projects", {"name": "p1"}, idem="k-p1")
    ok(st == 201 and b == a and h.get("idempotent-replayed") == "true",
       "the retry gets the first answer (same ids), marked Idempotent-Replayed", (st, b, h))
    names = [p["Name"] for p in call(s, "GET", "/v1/projects")[1]["projects"]]
    is_(names.count("p1"), 1, "and nothing was done again")
    st, doc, _ = call(s, "POST", "/v1/projects", {"name": "p1-other"}, idem="k-p1")
    is_((st, err_of(doc)), (422, 'Idempotency-Key "k-p1" was used with a different request'),
        "the same key with another body: 422")
    st, doc, _ = call(s, "POST", "/v1/projects", {"name": "p1"}, idem="x" * 256)
    is_(st, 400, "an Idempotency-Key over 255 bytes: 400")
    st, doc, _ = call(s, "POST", "/v1/projects", {"name": "p1"}, idem="k-p1-again")
    is_((st, err_of(doc)), (409, 'project "p1" already exists'), "a new key runs the request again (409 here)")
    st, doc, h = call(s, "POST", "/v1/projects", {"name": "p1"}, idem="k-p1-again")
    ok(st == 409 and h.get("idempotent-replayed") == "true", "a 4xx answer is kept too", (st, h))
    # Another team's key space is its own.
    st, doc, h = call(s, "POST", "/v1/projects", {"name": "p1"}, key=st8["eve_key"], idem="k-p1")
    ok(st == 201 and doc["project"]["ID"] != a["project"]["ID"] and "idempotent-replayed" not in h,
       "another team's same key and body: its own request, not our answer", (st, doc))
    # An answer with a new secret is not kept (secrets are stored as hashes only).
    st, k1, _ = call(s, "POST", "/v1/keys", {"name": "ci"}, idem="k-key")
    st2, k2, h = call(s, "POST", "/v1/keys", {"name": "ci"}, idem="k-key")
    ok(st == 201 and st2 == 201 and k1["api_key"] != k2["api_key"] and "idempotent-replayed" not in h,
       "POST /v1/keys with a key: not kept, the retry mints another", (st, st2))
    st8["secrets"] = [k1["api_key"], k2["api_key"]]
    # A deploy: the same deployment id back.
    compose = T.QUICKSTART
    st, d1, _ = call(s, "POST", "/v1/projects/p1/deploy", {"compose": compose}, idem="k-deploy")
    st2, d2, h = call(s, "POST", "/v1/projects/p1/deploy", {"compose": compose}, idem="k-deploy")
    ok(st == 202 and st2 == 202 and d1["deployment"]["ID"] == d2["deployment"]["ID"]
       and h.get("idempotent-replayed") == "true", "POST .../deploy replayed: the same deployment", (st, st2))
    deps = call(s, "GET", "/v1/envs/%s/deployments" % d1["deployment"]["EnvID"])[1]["deployments"]
    is_(len(deps), 1, "one deployment made")
    doc = wait_dep(s, d1["deployment"]["ID"])
    st8["v1"] = doc["deployment"]["VersionID"]
    st8["p1_env"] = d1["deployment"]["EnvID"]


def test_quota_envs(s, st8):
    team = st8["team"]
    st, q, _ = quotas(s, team)
    is_((st, q["limits"], q["overrides"], q["use"]),
        (200, {"max_environments": 4, "max_sandboxes": 2, "max_exec": 2},
         {"max_environments": None, "max_sandboxes": None, "max_exec": None},
         {"environments": 1, "sandboxes": 0, "exec": 0}),
        "GET /v1/teams/{team}/quotas: limits from the flags, no overrides, the use")
    st, a, _ = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36"})
    st2, b, _ = call(s, "POST", "/v1/sandboxes", {"from_version": st8["v1"]})
    ok(st == 201 and st2 == 201, "two sandboxes (image and from_version)", (st, a, st2, b))
    st8["sbx"] = [a["environment"]["ID"], b["environment"]["ID"]]
    ok("Sandbox" not in a["environment"], "the sandbox mark is bookkeeping, not shown", a["environment"])
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36"})
    is_((st, err_of(doc)), (429, "quota exceeded: live sandboxes 2 of 2 (server default)"),
        "a third sandbox: 429 naming the limit and the use")
    st, doc, _ = call(s, "POST", "/v1/projects", {"name": "p3"})
    is_(st, 201, "a project (its alpha environment is the 4th)")
    for what, method, path, body in (
            ("a project", "POST", "/v1/projects", {"name": "p4"}),
            ("a fork", "POST", "/v1/envs/%s/fork" % st8["p1_env"], {}),
            ("a deploy to a new environment", "POST", "/v1/projects/p1/deploy", {"env": "new", "compose": T.QUICKSTART}),
            ("a sandbox", "POST", "/v1/sandboxes", {"image": "busybox:1.36"})):
        st, doc, _ = call(s, method, path, body)
        is_((st, err_of(doc)), (429, "quota exceeded: live environments 4 of 4 (server default)"),
            "%s over the environment quota: 429" % what)
    st, doc, _ = call(s, "POST", "/v1/projects/p1/deploy", {"compose": T.QUICKSTART})
    is_(st, 202, "a deploy to an existing environment is not a new one")
    wait_dep(s, doc["deployment"]["ID"])
    # Destroying one frees its place.
    st, doc, _ = call(s, "DELETE", "/v1/envs/" + st8["sbx"][0])
    wait_dep(s, doc["deployment"]["ID"])
    st, q, _ = quotas(s, team)
    is_(q["use"], {"environments": 3, "sandboxes": 1, "exec": 0}, "a destroyed sandbox no longer counts")
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36"})
    ok(st == 201, "so a sandbox fits again", (st, doc))
    st8["sbx"] = [st8["sbx"][1], doc["environment"]["ID"]]


def test_quota_route(s, st8):
    team, eve_team, eve_key, eve_sess = st8["team"], st8["eve_team"], st8["eve_key"], st8["eve_sess"]
    path = "/v1/teams/%s/quotas" % team
    st, q, _ = call(s, "PUT", path, {"max_environments": 10, "max_sandboxes": 5})
    ok(st == 200 and q["limits"] == {"max_environments": 10, "max_sandboxes": 5, "max_exec": 2}
       and q["overrides"] == {"max_environments": 10, "max_sandboxes": 5, "max_exec": None},
       "PUT by the operator team sets the team's own quotas", (st, q))
    st, doc, _ = call(s, "POST", "/v1/projects", {"name": "p4"})
    is_(st, 201, "and a 5th environment fits")
    st, q, _ = call(s, "PUT", path, {"max_environments": 5})
    st, doc, _ = call(s, "POST", "/v1/projects", {"name": "p5"})
    is_((st, err_of(doc)), (429, "quota exceeded: live environments 5 of 5 (this team's quota)"),
        "over the team's own quota: 429 says whose limit")
    st, q, _ = call(s, "PUT", path, {"max_environments": 0})
    st, doc, _ = call(s, "POST", "/v1/projects", {"name": "p5"})
    is_(st, 201, "0 is no limit")
    st, q, _ = call(s, "PUT", path, {"max_environments": None, "max_sandboxes": None})
    is_((q["limits"]["max_environments"], q["overrides"]["max_environments"]), (4, None),
        "null goes back to the server default")
    st, doc, _ = call(s, "PUT", path, {"max_exec": -1})
    is_(st, 400, "a negative quota: 400")
    st, doc, _ = call(s, "PUT", path, {"max_cpus": 3})
    ok(st == 400 and "unknown quota" in err_of(doc), "an unknown quota: 400", doc)
    st, doc, _ = call(s, "PUT", "/v1/teams/team_nope/quotas", {})
    is_(st, 404, "an unknown team: 404")
    # Another team: reads its own, may not set even its own, may not see ours.
    st, q, _ = quotas(s, eve_team, key=eve_key)
    ok(st == 200 and q["limits"]["max_environments"] == 4 and q["use"]["environments"] == 1,
       "a team's key reads its own quotas", (st, q))
    st, doc, _ = call(s, "PUT", "/v1/teams/%s/quotas" % eve_team, {"max_environments": 100}, key=eve_key)
    is_((st, err_of(doc)), (403, "quotas are set by the server's operator team (the first team)"),
        "a non-operator key may not set quotas: 403")
    st, doc, _ = call(s, "PUT", "/v1/teams/%s/quotas" % eve_team, {"max_environments": 100}, key=eve_sess)
    is_(st, 403, "nor may its owner's session")
    st, doc, _ = quotas(s, team, key=eve_key)
    is_(st, 403, "another team's quotas: 403")
    st, doc, _ = call(s, "PUT", "/v1/teams/%s/quotas" % eve_team, {"max_environments": 1})
    st, doc, _ = call(s, "POST", "/v1/projects", {"name": "p2"}, key=eve_key)
    is_((st, err_of(doc)), (429, "quota exceeded: live environments 1 of 1 (this team's quota)"),
        "the operator set the other team's quota, and it holds")


def exec_use(s, st8):
    return quotas(s, st8["team"])[1]["use"]["exec"]


def exec_req(s, env, cmd, timeout_sec=None):
    body = {"service": "main", "cmd": cmd}
    if timeout_sec:
        body["timeout_sec"] = timeout_sec
    return call(s, "POST", "/v1/envs/%s/exec" % env, body)


def test_quota_exec(s, st8):
    sc, env = st8["sc"], st8["sbx"][0]
    sc.plan["env.exec"] = ["hold", "hold"]
    t1, r1 = in_thread(exec_req, s, env, ["echo", "1"])
    t2, r2 = in_thread(exec_req, s, env, ["echo", "2"])
    ok(wait_until(lambda: len(sc.held) == 2), "two execs running on the host")
    is_(exec_use(s, st8), 2, "use.exec counts them")
    st, doc, _ = exec_req(s, env, ["echo", "3"])
    is_((st, err_of(doc)), (429, "quota exceeded: execs in flight 2 of 2 (server default)"),
        "a third exec: 429")
    sc.release()
    t1.join(10)
    t2.join(10)
    ok(r1["r"][0] == 200 and r2["r"][0] == 200 and r1["r"][1]["stdout"] == "1\n", "both finish",
       (r1.get("r"), r2.get("r")))
    ok(wait_until(lambda: exec_use(s, st8) == 0), "completion gives the slots back")
    sc.plan["env.exec"] = ["fail:boom"]
    st, doc, _ = exec_req(s, env, ["echo", "x"])
    is_((st, err_of(doc), exec_use(s, st8)), (502, "boom", 0), "a failed exec gives its slot back")
    st, doc, _ = exec_req(s, env, [])
    is_((st, exec_use(s, st8)), (400, 0), "a refused exec takes none")
    # The client goes away: the exec still runs, and keeps its slot until it ends.
    sc.plan["env.exec"] = ["hold"]
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    body = b'{"service":"main","cmd":["echo","gone"]}'
    sock.sendall(b"POST /v1/envs/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                 % (env.encode(), BOOT_KEY.encode(), len(body), body))
    ok(wait_until(lambda: len(sc.held) == 1), "an exec whose client will go away is running")
    sock.close()
    time.sleep(0.5)
    is_(exec_use(s, st8), 1, "the client went away: the slot stays while the command runs")
    sc.release()
    ok(wait_until(lambda: exec_use(s, st8) == 0), "it ended: the slot is back")
    # A timeout: the host never answers.
    sc.plan["env.exec"] = ["stall"]
    t0 = time.time()
    st, doc, _ = exec_req(s, env, ["sleep", "99"], timeout_sec=1)
    ok(st == 502 and exec_use(s, st8) == 0, "an exec that times out (%.0f s) gives its slot back" % (time.time() - t0),
       (st, doc))


def test_idem_sandboxes(s, st8):
    sc = st8["sc"]
    call(s, "PUT", "/v1/teams/%s/quotas" % st8["team"], {"max_environments": 0, "max_sandboxes": 0})
    creates = len(sc.commands("env.create"))
    st, a, _ = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36"}, idem="sbx-1")
    st2, b, h = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36"}, idem="sbx-1")
    ok(st == 201 and st2 == 201 and a["environment"]["ID"] == b["environment"]["ID"]
       and h.get("idempotent-replayed") == "true", "POST /v1/sandboxes replayed: the same sandbox id", (st, st2))
    is_(len(sc.commands("env.create")) - creates, 1, "one sandbox made on the host")
    st8["sbx_idem"] = a
    # While the first is still running.
    sc.plan["env.create"] = ["hold"]
    t, r = in_thread(call, s, "POST", "/v1/sandboxes", {"image": "busybox:1.36", "name": "slow"}, BOOT_KEY, "sbx-2")
    ok(wait_until(lambda: len(sc.held) == 1), "a sandbox on hold")
    st, doc, h = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36", "name": "slow"}, idem="sbx-2")
    ok(st == 409 and "still in progress" in err_of(doc) and h.get("retry-after") == "1",
       "a retry while the first runs: 409 with Retry-After", (st, doc, h))
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36", "name": "other"}, idem="sbx-2")
    is_((st, err_of(doc)), (422, 'Idempotency-Key "sbx-2" was used with a different request'),
        "another request with it meanwhile: 422")
    sc.release()
    t.join(10)
    st, doc, h = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36", "name": "slow"}, idem="sbx-2")
    ok(r["r"][0] == 201 and st == 201 and doc["environment"]["ID"] == r["r"][1]["environment"]["ID"],
       "after it: the retry gets its answer", (r.get("r"), st))
    # The client gives up while its sandbox is made: the work goes on and its retry gets it.
    sc.plan["env.create"] = ["hold"]
    creates = len(sc.commands("env.create"))
    body = json.dumps({"image": "busybox:1.36", "name": "left"}).encode()  # the bytes call() sends
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
    sock.sendall(b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: sbx-3\r\n"
                 b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (BOOT_KEY.encode(), len(body), body))
    ok(wait_until(lambda: len(sc.held) == 1), "a sandbox whose client will go away is on hold")
    sock.close()
    time.sleep(0.3)
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36", "name": "left"}, idem="sbx-3")
    is_(st, 409, "the client left: the first request still runs (409 for the retry)")
    sc.release()

    def retry():
        r = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36", "name": "left"}, idem="sbx-3")
        return r if r[0] != 409 else None
    st, doc, h = wait_until(retry) or (409, None, {})
    ok(st == 201 and doc["environment"]["Name"] == "left" and h.get("idempotent-replayed") == "true"
       and len(sc.commands("env.create")) - creates == 1,
       "once it is healthy the retry gets the answer the client missed (one sandbox)", (st, doc, h))
    # 5xx is not kept: a retry runs again.
    st, doc, _ = call(s, "POST", "/v1/sandboxes", {"image": "bad:image"}, idem="sbx-bad")
    st2, doc2, h = call(s, "POST", "/v1/sandboxes", {"image": "bad:image"}, idem="sbx-bad")
    ok(st == 502 and st2 == 502 and "idempotent-replayed" not in h, "a 502 is not kept: the retry runs", (st, st2))


def test_restart(s, st8, store):
    is_(s.stop(), 0, "SIGTERM: exit 0")
    raw = open(os.path.join(store, "log"), "rb").read()
    ok(b"idk_" in raw and not any(k.encode() in raw for k in st8["secrets"]),
       "answers are in the store, no API key in plaintext among them")
    s = T.Server(store, ENV, FLAGS)
    st, doc, h = call(s, "POST", "/v1/projects", {"name": "p1"}, idem="k-p1")
    ok(st == 201 and doc == st8["p1"] and h.get("idempotent-replayed") == "true",
       "after a restart: the stored answer (same project id)", (st, doc))
    st, doc, h = call(s, "POST", "/v1/sandboxes", {"image": "busybox:1.36"}, idem="sbx-1")
    ok(st == 201 and doc["environment"]["ID"] == st8["sbx_idem"]["environment"]["ID"],
       "after a restart: the same sandbox id", (st, doc))
    st, q, _ = quotas(s, st8["eve_team"])
    is_(q["overrides"]["max_environments"], 1, "quota overrides survive a restart")
    is_(s.stop(), 0, "exit 0")
    # A short keep: the answer expires, and the request runs again.
    s = T.Server(store, ENV, FLAGS + ["-idempotency-ttl", "1s"])
    st, a, _ = call(s, "POST", "/v1/projects", {"name": "ttl"}, idem="k-ttl")
    st2, b, h = call(s, "POST", "/v1/projects", {"name": "ttl"}, idem="k-ttl")
    ok(st == 201 and st2 == 201 and a == b, "kept within -idempotency-ttl", (st, st2))
    time.sleep(1.3)
    st, doc, h = call(s, "POST", "/v1/projects", {"name": "ttl"}, idem="k-ttl")
    ok(st == 409 and "idempotent-replayed" not in h, "after it: the key is forgotten and the request runs again",
       (st, doc))
    is_(s.stop(), 0, "exit 0")
    time.sleep(1.1)  # the last answer (409) is past its second too
    s = T.Server(store, ENV, FLAGS + ["-idempotency-ttl", "1s"])
    ok("expired answers deleted" in s.stderr(own=True), "start-up deletes expired answers")
    is_(s.stop(), 0, "exit 0")
    # Bounded: at most DENV_IDEMPOTENCY_MAX answers per team, the oldest go first.
    s = T.Server(store, dict(ENV, DENV_IDEMPOTENCY_MAX="3"), FLAGS)
    first = [call(s, "POST", "/v1/projects", {"name": "cap-%d" % i}, idem="cap-%d" % i)[1] for i in range(4)]
    st, doc, h = call(s, "POST", "/v1/projects", {"name": "cap-0"}, idem="cap-0")
    ok(st == 409 and "idempotent-replayed" not in h, "the 4th answer pushed out the oldest (it runs again)", (st, doc))
    st, doc, h = call(s, "POST", "/v1/projects", {"name": "cap-3"}, idem="cap-3")
    ok(st == 201 and doc == first[3] and h.get("idempotent-replayed") == "true", "a newer one is still kept", (st, h))
    return s


def main():
    if not os.access(T.BIN, os.X_OK):
        print("1..0 # SKIP %s is not built" % T.BIN)
        return 0
    tmp = tempfile.mkdtemp(prefix="denv-cp-policy-")
    store = os.path.join(tmp, "store")
    st8 = {}
    s = sc = None
    try:
        test_flags()
        s = T.Server(store, ENV, FLAGS)
        st8["team"] = call(s, "GET", "/v1/me")[1]["team"]["ID"]
        st8["eve_sess"], st8["eve_key"], st8["eve_team"] = second_team(s)
        tok = call(s, "POST", "/v1/join-tokens", {})[1]["token"]
        sc = st8["sc"] = Sidecar(s.port, token=tok)
        ok(sc.wait_admitted(), "a scripted sidecar joined")
        for t in (test_idem_projects, test_quota_envs, test_quota_route, test_quota_exec, test_idem_sandboxes):
            t(s, st8)
        s = test_restart(s, st8, store)
        sc.stop()
        sc = None
        is_(s.stop(), 0, "exit 0")
        s = None
    except Exception:
        ok(False, "test run raised", traceback.format_exc())
        if s is not None:
            print("# denv-cp stderr tail:")
            for line in s.stderr().splitlines()[-25:]:
                print("#   " + line)
            s.proc.kill()
    finally:
        if sc is not None:
            sc.stop()
    return tap.finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
