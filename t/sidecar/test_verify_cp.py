"""denv verify end to end: the real control plane (bin/denv-cp), denvd on
real Docker, the CLI (bin/denv verify). A deploy with x-denv.agent and an
image verifier; then:
  1. the agent links its answer to /etc/passwd; `denv verify --resume`:
     reward 0, source refused, the exact reason, no snapshot, fork or
     grader, and the agent is running again afterwards (collect resumed it);
  2. the agent writes the right answer; `denv verify`: phases stop, collect,
     snapshot, clone, grade, verdict with their evidence, reward 1 from
     reward.txt, the capture version healthy, the agent's environment keeps
     its current version, the grader's fork destroyed, and the agent frozen
     (exec is refused: frozen by verify);
  3. a service verifier grades inside the fork's copy of the service, as root;
  4. a verifier sleeping past timeout_sec fails the grade phase.
Needs [F7] (env.snapshot, env.fork on the sidecar)."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import TAP, docker_leftovers, remove_project  # noqa: E402
from realcp import RealCP  # noqa: E402

top, tmp = sys.argv[1], sys.argv[2]
t = TAP()
rcp = RealCP(top, tmp, 18500)
cp, srv, key, req = rcp.proc, rcp.srv, rcp.key, rcp.req
# The verifier leaves a marker in its logs directory on the host
# (<data>/verify/<deployment>/logs), so a refused verify shows none.
GRADE = ("mkdir -p /logs/verifier; touch /logs/verifier/ran; "
         "if [ \"$(cat /submission/home/agent/answer.txt)\" = 42 ]; then echo 1; else echo 0; fi "
         "> /logs/verifier/reward.txt; echo graded")
COMPOSE = """
x-denv:
  egress: deny
  agent: { service: box }
  verifier:
    image: denv-test/busybox
    command: ["sh", "-c", %s]
    collect: ["/home/agent/answer.txt"]
    timeout_sec: 60
services:
  box:
    image: denv-test/busybox
    user: "1000:1000"
    command: ["sleep", "3600"]
    environment: { HOME: /home/agent }
    volumes: ["home:/home/agent"]
volumes: { home: {} }
""" % json.dumps(GRADE)

# A service verifier: it runs inside the fork's copy of box, as root.
COMPOSE_SVC = COMPOSE.replace("""    image: denv-test/busybox
    command: ["sh", "-c", %s]""" % json.dumps(GRADE), """    service: box
    command: ["sh", "-c", %s]""" % json.dumps(
    "echo \"uid=$(id -u) $(cat /submission/home/agent/answer.txt) $DENV_VERIFY_ID\"; "
    "echo 1 > /logs/verifier/reward.txt"))
# A verifier that sleeps past its timeout_sec.
COMPOSE_SLOW = COMPOSE.replace('["sh", "-c", %s]' % json.dumps(GRADE), '["sleep", "60"]').replace(
    "timeout_sec: 60", "timeout_sec: 2")


def wait_dep(depid, limit=180):
    return rcp.wait_dep(depid, limit)


def cli(*args, timeout=300):
    r = subprocess.run([top + "/bin/denv"] + list(args), capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, DENV_SERVER=srv, DENV_API_KEY=key, HOME=tmp, XDG_CONFIG_HOME=tmp))
    return r.returncode, r.stdout, r.stderr


def last_verify(env):
    st, deps = req("GET", "/v1/envs/%s/deployments" % env)
    rows = [x for x in (deps.get("deployments", []) if st == 200 else []) if x.get("Kind") == "verify"]
    rows.sort(key=lambda x: x.get("CreatedAt", ""))
    return wait_dep(rows[-1]["ID"]) if rows else {}


def phases_of(dd):
    return {p["Name"]: p for p in dd.get("phases", [])}


def exec_box(env, cmd):
    return req("POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": cmd})


d = None
env = None
graders = []
others = []
try:
    rcp.wait_up()
    st, tok = req("POST", "/v1/join-tokens", {})
    d = rcp.start_denvd(tok["token"])
    rcp.wait_connected()
    req("POST", "/v1/projects", {"name": "vf"})
    st, dep = req("POST", "/v1/projects/vf/deploy", {"compose": COMPOSE})
    dd = wait_dep(dep["deployment"]["ID"]) if st == 202 else {}
    env = dd.get("deployment", {}).get("EnvID")
    if not t.ok(dd.get("deployment", {}).get("Status") == "succeeded", "deploy with an agent and a verifier", dd):
        raise SystemExit(t.done())
    st, e0 = req("GET", "/v1/envs/%s" % env)
    cur0 = (e0.get("environment") or e0).get("CurrentVersionID") if st == 200 else None

    # ---- 1. an attack, with --resume ----
    st, r = exec_box(env, ["ln", "-s", "/etc/passwd", "/home/agent/answer.txt"])
    t.ok(st == 200 and r.get("exit_code") == 0, "the agent links its answer to /etc/passwd", r)
    rc, out, err = cli("verify", "--resume", env)
    dd = last_verify(env)
    ph = phases_of(dd)
    v = (ph.get("verdict") or {}).get("Evidence") or {}
    g = (ph.get("grade") or {}).get("Evidence") or {}
    depid = dd.get("deployment", {}).get("ID", "")
    t.ok(rc == 0 and "reward: 0 (source: refused)" in out and
         'refused: ["home/agent/answer.txt: symlink"]' in out, "denv verify --resume prints the refusal", (rc, out, err))
    t.ok(v.get("reward") == 0 and v.get("source") == "refused" and v.get("refused") == ["home/agent/answer.txt: symlink"]
         and v.get("agent_frozen") is False, "verdict: reward 0, source refused, the reason", v)
    t.ok((ph.get("collect") or {}).get("Evidence", {}).get("refused") == ["home/agent/answer.txt: symlink"] and
         g.get("refused") is True and all((ph.get(n) or {}).get("Status") == "skipped"
                                           for n in ("snapshot", "clone", "grade")),
         "collect evidence says refused; snapshot, clone and grade are skipped", ph)
    t.ok(not os.path.exists(os.path.join(tmp, "data", "verify", depid, "logs", "ran")) and
         not os.path.exists(os.path.join(tmp, "data", "verify", depid, "submission")),
         "the grader never ran; no copy is left")
    graders.append(g and (ph.get("clone") or {}).get("Evidence", {}).get("grader_env"))
    st, r = exec_box(env, ["rm", "/home/agent/answer.txt"])
    t.ok(st == 200 and r.get("exit_code") == 0, "after --resume the agent runs again", r)

    # ---- 2. the right answer, frozen afterwards ----
    st, r = exec_box(env, ["sh", "-c", "echo 42 > /home/agent/answer.txt"])
    t0 = time.time()
    rc, out, err = cli("verify", env)
    took = time.time() - t0
    dd = last_verify(env)
    ph = phases_of(dd)
    names = [p["Name"] for p in dd.get("phases", [])]
    t.diag("denv verify took %.1f s: %s" % (took, out.strip().replace("\n", " | ")))
    t.ok(rc == 0 and "reward: 1 (source: reward.txt)" in out, "denv verify prints reward 1 (source: reward.txt)",
         (rc, out, err))
    t.ok(names == ["stop", "collect", "snapshot", "clone", "grade", "verdict"] and
         all(p["Status"] == "ok" for p in dd.get("phases", [])), "phases stop → collect → snapshot → clone → "
         "grade → verdict, all ok", dd)
    ev = {n: (ph.get(n) or {}).get("Evidence") or {} for n in names}
    t.ok(ev["stop"] == {"agent_service": "box", "mode": "pause"}, "stop evidence", ev["stop"])
    t.ok(ev["collect"].get("files") == 1 and ev["collect"].get("bytes") == 3 and ev["collect"].get("missing") == []
         and ev["collect"].get("refused") == [], "collect evidence {files 1, bytes 3, missing [], refused []}",
         ev["collect"])
    t.ok(ev["snapshot"].get("snapshot") and ev["snapshot"].get("consistent") is True, "snapshot evidence",
         ev["snapshot"])
    grader = ev["clone"].get("grader_env")
    graders.append(grader)
    t.ok(grader and "forked_in_ms" in ev["clone"], "clone evidence: the grader's fork", ev["clone"])
    t.ok(ev["grade"].get("reward") == 1 and ev["grade"].get("source") == "reward.txt" and
         ev["grade"].get("exit_code") == 0 and ev["grade"].get("stdout") == "graded\n" and ev["grade"].get("ran_for"),
         "grade evidence", ev["grade"])
    v = ev["verdict"]
    t.ok(v.get("reward") == 1 and v.get("source") == "reward.txt" and v.get("agent_frozen") is True and
         v.get("refused") == [] and v.get("missing") == [] and "took_ms" in v, "verdict evidence", v)
    depid = dd.get("deployment", {}).get("ID", "")
    t.ok(os.path.exists(os.path.join(tmp, "data", "verify", depid, "logs", "ran")), "the grader ran (marker)")
    st, r = exec_box(env, ["cat", "/home/agent/answer.txt"])
    # An error answer comes back as its body's text.
    msg = json.loads(r).get("error", "") if isinstance(r, str) and r.startswith("{") else ""
    t.ok(st == 502 and 'service "box" is frozen by verify' in msg and "denv verify --resume" in msg,
         "without --resume the agent stays frozen: exec is a 502 saying frozen by verify and how to resume", (st, r))
    st, e1 = req("GET", "/v1/envs/%s" % env)
    cur1 = (e1.get("environment") or e1).get("CurrentVersionID") if st == 200 else None
    t.ok(cur0 and cur1 == cur0, "the agent's environment keeps its current version", (cur0, cur1))
    capture = dd.get("deployment", {}).get("VersionID")
    st, vs = req("GET", "/v1/envs/%s/versions" % env)
    cap = [x for x in (vs.get("versions", []) if st == 200 else []) if x.get("ID") == capture]
    t.ok(cap and cap[0].get("Healthy") is True, "the capture version is healthy (forkable)", (capture, vs))
    # The grader's fork is destroyed at the verdict (asynchronously).
    end = time.time() + 60
    left = ["x"]
    while time.time() < end and left:
        left = [g for g in graders if g and docker_leftovers(g.lower())[0]]
        time.sleep(0.5)
    st, ge = req("GET", "/v1/envs/%s" % grader)
    gstatus = (ge.get("environment") or ge).get("Status") if st == 200 else st
    t.ok(not left and gstatus == "destroyed", "the grader's forks are destroyed", (left, gstatus))

    # ---- 3. a service verifier, inside the fork's box ----
    def deploy(name, compose):
        req("POST", "/v1/projects", {"name": name})
        st, dep = req("POST", "/v1/projects/%s/deploy" % name, {"compose": compose})
        dd = wait_dep(dep["deployment"]["ID"]) if st == 202 else {}
        return dd.get("deployment", {}).get("EnvID"), dd
    env2, dd = deploy("vfsvc", COMPOSE_SVC)
    others.append(env2)
    t.ok(env2 and dd["deployment"]["Status"] == "succeeded", "deploy with a service verifier", dd)
    exec_box(env2, ["sh", "-c", "echo 42 > /home/agent/answer.txt"])
    rc, out, err = cli("verify", "--resume", env2)
    dd = last_verify(env2)
    ph = phases_of(dd)
    g = (ph.get("grade") or {}).get("Evidence") or {}
    graders.append((ph.get("clone") or {}).get("Evidence", {}).get("grader_env"))
    t.ok(rc == 0 and "reward: 1 (source: reward.txt)" in out and
         g.get("stdout") == "uid=0 42 %s\n" % dd["deployment"]["ID"],
         "service verifier: graded inside the fork's box as root over /submission; reward.txt copied back",
         (rc, out, err, g))

    # ---- 4. a verifier past its timeout_sec ----
    env3, dd = deploy("vfslow", COMPOSE_SLOW)
    others.append(env3)
    t0 = time.time()
    rc, out, err = cli("verify", "--resume", env3)
    took = time.time() - t0
    dd = last_verify(env3)
    ph = phases_of(dd)
    v = (ph.get("verdict") or {}).get("Evidence") or {}
    graders.append((ph.get("clone") or {}).get("Evidence", {}).get("grader_env"))
    t.ok(rc != 0 and dd["deployment"]["Status"] == "failed" and (ph.get("grade") or {}).get("Status") == "failed"
         and "timeout_sec (2 s)" in ((ph.get("grade") or {}).get("Error") or "") and took < 30,
         "a verifier sleeping past timeout_sec fails the grade phase (%.1f s)" % took, (rc, out, err, ph.get("grade")))
    t.ok(v.get("reward") is None and v.get("source") == "error" and v.get("fault") == "verifier" and
         "timeout_sec" in v.get("error", ""), "verdict: reward null, source error, the verifier's fault", v)
    t.ok("error (verifier): grade: " in out and "reward: null (source: error)" in out,
         "denv verify prints whose fault it is before the null reward", out)
    end = time.time() + 60
    left = ["x"]
    while time.time() < end and left:
        left = [g for g in graders if g and any(docker_leftovers(g.lower()))]
        time.sleep(0.5)
    t.ok(not left, "every grader's fork is gone, verifier containers included", left)
finally:
    if d:
        d.kill()
        d.wait()
    cp.kill()
    cp.wait()
    for x in [env] + others + graders:
        if x:
            remove_project(x.lower())
    if t.failed:
        for name in ("cp.log", "denvd.log"):
            try:
                t.diag("%s tail:\n%s" % (name, open(os.path.join(tmp, name)).read()[-2500:]))
            except OSError:
                pass
sys.exit(t.done())
