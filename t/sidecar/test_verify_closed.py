"""verify fails closed, end to end (bin/denv-cp, denvd on real Docker): what
an agent can do to its own files and volumes scores 0 with the reason in
`refused`, never an error, and the agent stays frozen.

Mode "attacks":
  1. a sparse 300 MiB file among the collect paths: reward 0, the exact
     refusal, `missing` names both absent paths (one declared after the
     refused one), the snapshot, clone and grade phases are skipped and no
     grader environment or container exists; the agent is frozen;
  2. the same submission again, with --resume: the same `missing` and
     `refused`, and the agent runs again afterwards;
  3. 258 nested directories in a collected directory: collect refuses
     ("deeper than 32"), no snapshot, no fork, the agent still paused;
  4. the same outside the collect paths: the snapshot and the fork copy
     the tree (no depth limit of their own) and the grader gives reward 1;
  5. a path longer than the copier makes (4096 bytes) in the volume:
     collect passes, the snapshot refuses: reward 0 with "volume home:
     path too long", no grader fork, the capture version not healthy, the
     agent still paused (docker says so).
Mode "diskfill" (the data directory is a small filesystem the caller
mounted): the agent fills its volume's disk; reward 0 with "volume home:
disk full", the agent still paused. Then a volume with room for the
snapshot but not for the grader's fork as well: the same, from the clone.
argv: top tmp mode."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import TAP, docker, remove_project  # noqa: E402
from realcp import RealCP  # noqa: E402

top, tmp, mode = sys.argv[1], sys.argv[2], sys.argv[3]
t = TAP()
rcp = RealCP(top, tmp, 18700 if mode == "attacks" else 19700)
cp, srv, key, req = rcp.proc, rcp.srv, rcp.key, rcp.req
GRADE = ("mkdir -p /logs/verifier; touch /logs/verifier/ran; "
         "if [ \"$(cat /submission/home/agent/answer.txt)\" = 42 ]; then echo 1; else echo 0; fi "
         "> /logs/verifier/reward.txt")
COLLECT = ["/home/agent/answer.txt", "/home/agent/nope1", "/home/agent/big", "/home/agent/nope2", "/home/agent/out"]
COMPOSE = """
x-denv:
  egress: deny
  agent: { service: box }
  verifier:
    image: denv-test/busybox
    command: ["sh", "-c", %s]
    collect: %s
    timeout_sec: 60
services:
  box:
    image: denv-test/busybox
    user: "1000:1000"
    command: ["sleep", "3600"]
    environment: { HOME: /home/agent }
    volumes: ["home:/home/agent"]
volumes: { home: {} }
""" % (json.dumps(GRADE), json.dumps(COLLECT))
SKIPPED = ["snapshot", "clone", "grade"]
NEST = "i=0; while [ $i -lt %d ]; do mkdir d && cd d || exit 1; i=$((i+1)); done"


def cli(*args, timeout=300):
    r = subprocess.run([top + "/bin/denv"] + list(args), capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, DENV_SERVER=srv, DENV_API_KEY=key, HOME=tmp, XDG_CONFIG_HOME=tmp))
    return r.returncode, r.stdout, r.stderr


def last_verify(env):
    st, deps = req("GET", "/v1/envs/%s/deployments" % env)
    rows = [x for x in (deps.get("deployments", []) if st == 200 else []) if x.get("Kind") == "verify"]
    rows.sort(key=lambda x: x.get("CreatedAt", ""))
    return rcp.wait_dep(rows[-1]["ID"], 300) if rows else {}


def verify(env, *flags):
    """denv verify; (exit code, output, deployment view, phases by name, verdict evidence)."""
    rc, out, err = cli("verify", *(list(flags) + [env]))
    dd = last_verify(env)
    ph = {p["Name"]: p for p in dd.get("phases", [])}
    return rc, out + err, dd, ph, (ph.get("verdict") or {}).get("Evidence") or {}


def sh_box(env, script, timeout=120):
    st, r = req("POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": ["sh", "-c", script],
                                                     "timeout_sec": timeout})
    return r if st == 200 else {"exit_code": None, "stderr": str(r)}


def box_paused(env):
    name = docker("ps", "-a", "--filter", "label=com.docker.compose.project=" + env.lower(), "--filter",
                  "label=com.docker.compose.service=box", "--format", "{{.Names}}").stdout.split()
    st = docker("inspect", "--format", "{{.State.Paused}}", *name).stdout.strip() if name else ""
    return name[0] if name else None, st == "true"


def graders_of(env):
    """Live grader environments the control plane knows of, and environments (forks) this host has besides env."""
    st, envs = req("GET", "/v1/projects/vc%s/envs" % mode[:4])
    rows = [x for x in (envs.get("environments", []) if st == 200 else [])
            if ("-verify-" in (x.get("Name") or "") or x.get("Stage") == "verify") and x.get("Status") != "destroyed"]
    d = os.path.join(tmp, "data", "envs")
    return rows, [x for x in (os.listdir(d) if os.path.isdir(d) else []) if x != env]


def skipped(ph):
    return all((ph.get(n) or {}).get("Status") == "skipped" for n in SKIPPED)


def attacks(env, name):
    # ---- 1. a limit trips in the middle of the collect list ----
    r = sh_box(env, "echo 42 > ~/answer.txt && truncate -s 300M ~/big")
    t.ok(r.get("exit_code") == 0, "the agent answers and leaves a sparse 300 MiB file", r)
    rc, out, dd, ph, v = verify(env)
    want_refused = ["home/agent/big: submission larger than 256 MiB"]
    want_missing = ["/home/agent/nope1", "/home/agent/nope2", "/home/agent/out"]
    t.ok(rc == 0 and "reward: 0 (source: refused)" in out, "denv verify prints reward 0 (source: refused)",
         (rc, out))
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and v.get("reward") == 0 and
         v.get("source") == "refused" and v.get("refused") == want_refused, "verdict: reward 0, the refusal", v)
    t.ok(v.get("missing") == want_missing, "missing names both absent paths, the one after the refusal too", v)
    t.ok(skipped(ph) and (ph.get("grade") or {}).get("Evidence", {}).get("refused") is True,
         "snapshot, clone and grade are skipped after the refused collect", {n: ph.get(n) for n in SKIPPED})
    rows, ctrs = graders_of(env)
    t.ok(not rows and not ctrs and not dd.get("deployment", {}).get("TargetEnvID"),
         "no grader environment, no grader container", (rows, ctrs, dd.get("deployment")))
    _, paused = box_paused(env)
    r = sh_box(env, "true")
    t.ok(paused and "is paused" in r.get("stderr", ""), "the agent stays frozen", (paused, r))
    # ---- 2. the same submission again, resumed afterwards ----
    rc, out, dd, ph, v2 = verify(env, "--resume")
    t.ok(v2.get("missing") == v.get("missing") and v2.get("refused") == v.get("refused") and
         v2.get("reward") == 0 and v2.get("agent_frozen") is False,
         "a second run: the same missing and refused lists", (v, v2))
    _, paused = box_paused(env)
    r = sh_box(env, "rm ~/big")
    t.ok(not paused and r.get("exit_code") == 0, "--resume on a refusal: the agent runs again", (paused, r))
    # ---- 3. 258 nested directories inside a collect path: collect refuses, nothing follows ----
    r = sh_box(env, "mkdir ~/out && cd ~/out && " + NEST % 258)
    t.ok(r.get("exit_code") == 0, "the agent nests 258 directories in a collected directory", r)
    rc, out, dd, ph, v = verify(env)
    ref = v.get("refused") or [""]
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and v.get("reward") == 0 and
         v.get("source") == "refused" and len(ref) == 1 and ref[0].startswith("home/agent/out/d/d/") and
         ref[0].endswith(": deeper than 32"), "depth 258 in a collect path: reward 0, source refused, the reason", v)
    rows, forks = graders_of(env)
    cname, paused = box_paused(env)
    t.ok(skipped(ph) and not rows and not forks and paused, "no snapshot, no grader fork; the agent is still paused",
         (ph, rows, forks, cname))
    docker("unpause", cname)
    r = sh_box(env, "rm -rf ~/out")
    # ---- 4. the same depth outside the collect paths: a snapshot copies it, the grader grades ----
    r = sh_box(env, "mkdir ~/deep && cd ~/deep && " + NEST % 258)
    t.ok(r.get("exit_code") == 0, "the agent nests 258 directories outside the collect paths", r)
    rc, out, dd, ph, v = verify(env, "--resume")
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and v.get("reward") == 1 and
         v.get("source") == "reward.txt" and all(p.get("Status") == "ok" for p in ph.values()),
         "the snapshot and the grader's fork copy the deep tree; reward 1", (v, ph.get("snapshot")))
    # ---- 5. a path past what the copier makes (4096 bytes): the snapshot refuses ----
    # A shell cannot cd that deep: two chains of 1200, one moved into the other.
    r = sh_box(env, "mkdir ~/A ~/B && (cd ~/A && %s) && (cd ~/B && %s) && cd ~/A && %s && mv ~/B B"
               % (NEST % 1200, NEST % 1200, NEST.replace("mkdir d && ", "") % 1000), timeout=300)
    t.ok(r.get("exit_code") == 0, "the agent nests 2202 directories (a 4404-byte path)", r)
    rc, out, dd, ph, v = verify(env)
    snap = (ph.get("snapshot") or {}).get("Evidence") or {}
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and v.get("reward") == 0 and
         v.get("source") == "refused" and v.get("refused") == ["volume home: path too long"],
         "a volume the snapshot cannot copy: reward 0, source refused, the reason", (v, ph.get("snapshot")))
    t.ok((ph.get("collect") or {}).get("Evidence", {}).get("refused") == [] and snap.get("snapshot") is None and
         all((ph.get(n) or {}).get("Status") == "skipped" for n in ("clone", "grade")),
         "collect passed; the snapshot refused; clone and grade skipped", ph)
    capture = dd.get("deployment", {}).get("VersionID")
    st, vs = req("GET", "/v1/envs/%s/versions" % env)
    cap = [x for x in (vs.get("versions", []) if st == 200 else []) if x.get("ID") == capture]
    t.ok(cap and not cap[0].get("Healthy"), "the capture version is not healthy (nothing was captured)", cap)
    rows, forks = graders_of(env)
    cname, paused = box_paused(env)
    t.ok(not rows and not forks and paused, "no grader fork; the agent is still paused", (rows, forks, cname))
    # An agent that ends its own container (under gVisor a fork bomb does)
    # gets a 0, not an error that would drop the episode.
    docker("unpause", cname)
    docker("kill", cname)
    rc, out, dd, ph, v = verify(env)
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and v.get("reward") == 0 and
         v.get("source") == "refused" and any("container ended before collect" in x for x in v.get("refused", [])) and
         all((ph.get(n) or {}).get("Status") == "skipped" for n in ("clone", "grade")),
         "the agent's container ended: reward 0, source refused, the reason; no grader fork", (v, ph.get("collect")))


# The fork stops at its copy, or before it at denvd's reserve for its own
# log (disk.c): either way the disk is full and the score 0.
FORK_FULL = (["volume home: disk full"], ["fork: disk full"])


def diskfill(env, name):
    r = sh_box(env, "echo 42 > $HOME/answer.txt; dd if=/dev/zero of=$HOME/fill bs=1M 2>&1; df -k $HOME | tail -1")
    t.diag("fill: %s" % (r.get("stdout", "").strip().splitlines()[-1:],))
    t.ok(r.get("exit_code") is not None and "No space left" in r.get("stdout", "") + r.get("stderr", ""),
         "the agent fills its volume's disk", r)
    rc, out, dd, ph, v = verify(env)
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and v.get("reward") == 0 and
         v.get("source") == "refused" and v.get("refused") == ["volume home: disk full"],
         "disk full: reward 0, source refused, the reason", (v, {n: ph.get(n) for n in ph}))
    t.ok(all((ph.get(n) or {}).get("Status") == "skipped" for n in ("clone", "grade")), "no grader fork", ph)
    cname, paused = box_paused(env)
    t.ok(paused, "the agent is still paused", cname)
    snap = os.path.join(tmp, "data", "snaps", env, dd.get("deployment", {}).get("VersionID", "-"))
    t.ok(not os.path.exists(snap) or not os.listdir(snap), "the failed capture left no partial copy", snap)
    # A volume that fits once (the snapshot) but not twice (the grader's fork).
    docker("unpause", cname)
    r = sh_box(env, "rm -f $HOME/fill; dd if=/dev/zero of=$HOME/fill bs=1M count=24 2>&1")
    t.ok(r.get("exit_code") == 0, "the agent writes 24 MiB: room for the snapshot, not for the fork too", r)
    rc, out, dd, ph, v = verify(env)
    clone = (ph.get("clone") or {}).get("Evidence") or {}
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and v.get("reward") == 0 and
         v.get("source") == "refused" and v.get("refused") in FORK_FULL and
         (ph.get("snapshot") or {}).get("Status") == "ok" and clone.get("refused") in FORK_FULL and
         (ph.get("grade") or {}).get("Status") == "skipped",
         "the fork runs out of disk: reward 0, source refused, grade skipped", (v, ph.get("clone")))
    grader = clone.get("grader_env")
    end = time.time() + 60
    while time.time() < end and grader and os.path.exists(os.path.join(tmp, "data", "envs", grader)):
        time.sleep(0.5)
    cname, paused = box_paused(env)
    t.ok(grader and not os.path.exists(os.path.join(tmp, "data", "envs", grader)) and paused,
         "the refused fork is destroyed; the agent is still paused", (grader, cname))


d = None
env = None
try:
    rcp.wait_up()
    st, tok = req("POST", "/v1/join-tokens", {})
    d = rcp.start_denvd(tok["token"])
    rcp.wait_connected()
    name = "vc" + mode[:4]
    req("POST", "/v1/projects", {"name": name})
    st, dep = req("POST", "/v1/projects/%s/deploy" % name, {"compose": COMPOSE})
    dd = rcp.wait_dep(dep["deployment"]["ID"], 300) if st == 202 else {}
    env = dd.get("deployment", {}).get("EnvID")
    if not t.ok(dd.get("deployment", {}).get("Status") == "succeeded", "deploy with an agent and a verifier", dd):
        raise SystemExit(t.done())
    (attacks if mode == "attacks" else diskfill)(env, name)
finally:
    if d:
        d.kill()
        d.wait()
    cp.kill()
    cp.wait()
    if env:
        remove_project(env.lower())
    if t.failed:
        for logname in ("cp.log", "denvd.log"):
            try:
                t.diag("%s tail:\n%s" % (logname, open(os.path.join(tmp, logname)).read()[-3000:]))
            except OSError:
                pass
sys.exit(t.done())
