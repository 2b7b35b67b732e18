"""verify.collect and verify.run on real Docker through denvd and the fake
control plane. One environment plays both parts: the agent's (box, uid 1000,
its home a volume) and the grader's fork (judge, root, for the service
verifier; its network for the image verifier), since a fork needs [F7].

Each case collects declared paths from box, then grades; the verifier
writes a marker into its logs directory, so a refused case can show that no
grader ran (the same marker appears when one does)."""
import json
import os
import secrets
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, docker, docker_leftovers, remove_project  # noqa: E402

binary, tmp = sys.argv[1], sys.argv[2]
t = TAP()
env = "env_VF" + secrets.token_hex(5).upper()
project = env.lower()
box, judge = project + "-box-1", project + "-judge-1"
cp = FakeCP()
d = Denvd(binary, tmp, cp.url, token=cp.token,
          extra=["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"])
H = "/home/agent"
spec = {
    "version": "ver_vf", "egress": "deny", "volumes": ["home"], "warm": [],
    "services": [
        {"name": "box", "image": "denv-test/debian", "user": "1000:1000", "command": ["sleep", "3600"],
         "env": {"HOME": H}, "volumes": ["home:" + H], "depends_on": [], "ports": [],
         "resources": {"memory_mb": 512, "pids": 256, "cpus": 1}},
        {"name": "judge", "image": "denv-test/busybox", "user": "", "command": ["sleep", "3600"], "env": {},
         "volumes": [], "depends_on": [], "ports": [], "resources": {"memory_mb": 256, "pids": 128, "cpus": 1}},
    ],
}

# Files the agent (uid 1000) leaves behind, one directory per case.
SETUP = r"""
import os, socket
H = "/home/agent"
def w(p, s):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    open(p, "w").write(s)
w(H + "/answer/answer.txt", "42\n")
w(H + "/wrong/answer.txt", "41\n")
os.makedirs(H + "/link"); os.symlink("/etc/passwd", H + "/link/answer.txt")
os.symlink("/etc", H + "/lnkdir")                                  # a link in a parent of the path
os.makedirs(H + "/fifo"); os.mkfifo(H + "/fifo/answer.txt")
os.makedirs(H + "/sock"); socket.socket(socket.AF_UNIX).bind(H + "/sock/answer.txt")
d = H + "/deep/" + "/".join("d%d" % i for i in range(4, 33))   # 32 components
os.makedirs(d); w(d + "/f", "42\n")                                # a file at depth 33
d = H + "/deep32/" + "/".join("d%d" % i for i in range(4, 32))  # 31 components
os.makedirs(d); w(d + "/f", "42\n")                                # a file at depth 32
os.makedirs(H + "/many")
for i in range(20001):
    open(H + "/many/f%05d" % i, "w").close()
os.makedirs(H + "/big")
with open(H + "/big/blob", "w") as f:
    f.truncate(257 << 20)                                          # sparse; apparent size counts
os.makedirs(H + "/bigok")
with open(H + "/bigok/blob", "w") as f:
    f.truncate(1 << 20)
w(H + "/bg/answer.txt", "41\n")
print("ok")
"""


def grader(path, expect="42"):
    """An image verifier: marker, environment, then 1 or 0 into reward.txt."""
    return ["sh", "-c",
            "mkdir -p /logs/verifier; touch /logs/verifier/ran; id -u > /logs/verifier/uid; "
            "echo \"$SUBMISSION $DENV_VERIFY_ID\" > /logs/verifier/env; "
            "if touch /submission/x 2>/dev/null; then echo rw; else echo ro; fi > /logs/verifier/ro; "
            "if ping -c 1 -W 2 judge >/dev/null 2>&1; then echo yes; else echo no; fi > /logs/verifier/net; "
            "if [ \"$(cat /submission%s)\" = %s ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt; "
            "echo graded" % (path, expect)]


def collect(vid, paths):
    res, prog, _, _ = cp.command("verify.collect", env, {"id": vid, "agent_service": "box", "collect": paths},
                                 timeout=120)
    return res, prog


def run(vid, verifier, refused=False, timeout=120):
    res, prog, _, _ = cp.command("verify.run", env, {"id": vid, "verifier": verifier, "refused": refused},
                                 timeout=timeout)
    return res, prog


def ex(svc, cmd, timeout=60):
    res, _, _, _ = cp.command("env.exec", env, {"service": svc, "cmd": cmd, "timeout_sec": timeout}, timeout=timeout + 30)
    return res


def vdir(vid):
    return os.path.join(d.data, "verify", vid)


def newid(tag):
    return "dep_" + tag + secrets.token_hex(4)


def host_file(rel):
    try:
        return open(os.path.join(d.data, "envs", env, "vol", "home", rel)).read()
    except OSError as e:
        return "<%s>" % e


try:
    d.start()
    t.ok(cp.wait_conn(15), "denvd joins", d.logtext())
    res, prog, _, _ = cp.command("env.create", env, spec, timeout=240)
    if not t.ok(res and res["ok"], "env.create: box (uid 1000) and judge come up", (res, d.logtext()[-3000:])):
        raise SystemExit(t.done())
    r = ex("box", ["python3", "-c", SETUP], timeout=120)
    if not t.ok(r and r["ok"] and r["payload"]["stdout"] == "ok\n", "the agent leaves its files", r):
        raise SystemExit(t.done())
    # The agent is never root: the device node is made by root in the service.
    mk = docker("exec", "-u", "0", box, "sh", "-c", "mkdir -p %s/dev && mknod %s/dev/answer.txt c 1 3" % (H, H))
    t.ok(mk.returncode == 0, "a device node made as root inside box", mk.stderr)

    # ---- a background process left by the agent cannot change the graded copy ----
    r = ex("box", ["sh", "-c", "setsid sh -c 'sleep 3; echo 42 > %s/bg/answer.txt' "
                   ">/dev/null 2>&1 </dev/null & echo started" % H])
    vid = newid("bg")
    res, prog = collect(vid, [H + "/bg/answer.txt"])
    t.ok(res and res["ok"] and res["payload"]["refused"] == [] and res["payload"]["files"] == 1,
         "collect right after the agent's turn", res)
    t.ok(any(p == "freezing agent service box" for p in prog) and "checking the copy" in prog,
         "progress: freezing agent service box ... checking the copy", prog)
    st = json.loads(docker("inspect", box).stdout or "[{}]")[0].get("State", {})
    t.ok(st.get("Paused") is True, "box is paused", st)
    sub = os.path.join(vdir(vid), "submission")
    try:
        s = os.stat(sub)
        t.ok(stat.S_IMODE(s.st_mode) == 0o700 and s.st_uid == 0, "the copy is root-owned, 0700", oct(s.st_mode))
    except OSError as e:
        t.ok(False, "the copy is root-owned, 0700", e)
    copied = os.path.join(sub, "home/agent/bg/answer.txt")
    t.ok(os.path.isfile(copied) and open(copied).read() == "41\n",
         "the copy keeps the absolute layout (submission/home/agent/bg/answer.txt)", copied)
    time.sleep(4)   # the background process would have written by now
    t.ok(host_file("bg/answer.txt") == "41\n", "frozen: the background process has not run", host_file("bg/answer.txt"))
    res, _ = run(vid, {"image": "denv-test/busybox", "command": grader("/home/agent/bg/answer.txt"), "timeout_sec": 60})
    t.ok(res and res["ok"] and res["payload"]["reward"] == 0 and res["payload"]["source"] == "reward.txt",
         "the rewrite after the agent's turn does not count: reward 0", res)
    r = ex("box", ["cat", H + "/bg/answer.txt"])
    t.ok(r and r["ok"] is False and 'service "box" is frozen by verify' in r.get("error", "") and
         "denv verify --resume %s" % env in r.get("error", ""),
         "exec into the frozen agent is refused: frozen by verify, and how to resume", r)

    # ---- correct answer; a missing path is recorded, not refused ----
    vid = newid("ok")
    res, prog = collect(vid, [H + "/answer/answer.txt", H + "/nope.txt"])
    p = res and res.get("payload") or {}
    t.ok(res and res["ok"] and p.get("refused") == [] and p.get("missing") == [H + "/nope.txt"] and
         p.get("files") == 1 and p.get("bytes") == 3, "collect: missing recorded, not refused; files 1, bytes 3", res)
    t.ok("agent service box is already frozen" in prog, "an already frozen agent stays frozen", prog)
    res, prog = run(vid, {"image": "denv-test/busybox", "command": grader("/home/agent/answer/answer.txt"),
                          "collect": [], "timeout_sec": 60})
    p = res and res.get("payload") or {}
    t.ok(res and res["ok"] and p.get("reward") == 1 and p.get("source") == "reward.txt" and p.get("exit_code") == 0
         and p.get("stdout") == "graded\n" and p.get("ran_for"), "correct answer: reward 1 from reward.txt", res)
    t.ok("grading in denv-test/busybox" in prog, "progress: grading in denv-test/busybox", prog)
    logs = os.path.join(vdir(vid), "logs")

    def logf(name, lg=None):
        try:
            return open(os.path.join(lg or logs, name)).read().strip()
        except OSError:
            return None
    t.ok(logf("ran") == "" and logf("uid") == "0", "the grader ran as uid 0 (marker written)", (logf("ran"), logf("uid")))
    t.ok(logf("env") == "/submission " + vid, "SUBMISSION and DENV_VERIFY_ID set", logf("env"))
    t.ok(logf("ro") == "ro", "/submission is read-only", logf("ro"))
    t.ok(logf("net") == "yes", "the grader is on the fork's network (reaches judge)", logf("net"))
    t.ok(not os.path.exists(os.path.join(vdir(vid), "submission")), "the copy is removed after the grade")
    gone = docker("ps", "-aq", "--filter", "label=ai.denv.verify=" + vid).stdout.strip()
    t.ok(gone == "", "the verifier container is gone (--rm)", gone)

    # ---- wrong answer ----
    vid = newid("wr")
    res, _ = collect(vid, [H + "/wrong/answer.txt"])
    res, _ = run(vid, {"image": "denv-test/busybox", "command": grader("/home/agent/wrong/answer.txt")})
    t.ok(res and res["ok"] and res["payload"]["reward"] == 0 and res["payload"]["source"] == "reward.txt",
         "wrong answer: reward 0", res)

    # ---- stdout only ----
    vid = newid("so")
    res, _ = collect(vid, [H + "/answer/answer.txt"])
    res, _ = run(vid, {"image": "denv-test/busybox",
                       "command": ["sh", "-c", "echo checking; echo 'score: 0.75'"], "timeout_sec": 60})
    t.ok(res and res["ok"] and res["payload"]["reward"] == 0.75 and res["payload"]["source"] == "stdout",
         "no reward.txt: the last token of stdout, 0.75", res)

    # ---- no reward at all ----
    vid = newid("nr")
    res, _ = collect(vid, [H + "/answer/answer.txt"])
    res, _ = run(vid, {"image": "denv-test/busybox", "command": ["sh", "-c", "echo no score here; exit 3"]})
    t.ok(res and res["ok"] is False and res["error"] == "verifier wrote no reward (exit 3)",
         "no reward: 'verifier wrote no reward (exit 3)'", res)

    # ---- attacks: refused, the copy deleted, no grader ----
    deep = "home/agent/deep/" + "/".join("d%d" % i for i in range(4, 33)) + "/f"
    attacks = [
        ("symlink to /etc/passwd", H + "/link/answer.txt", lambda x: x == ["home/agent/link/answer.txt: symlink"]),
        ("a link in a parent of the declared path", H + "/lnkdir/passwd",
         lambda x: x == ["home/agent/lnkdir: symlink"]),
        ("FIFO", H + "/fifo/answer.txt", lambda x: x == ["home/agent/fifo/answer.txt: fifo"]),
        ("device node made by root", H + "/dev/answer.txt", lambda x: x == ["home/agent/dev/answer.txt: device"]),
        ("socket", H + "/sock/answer.txt", lambda x: x == ["home/agent/sock/answer.txt: socket"]),
        ("socket inside a collected directory", H + "/sock", lambda x: x == ["home/agent/sock/answer.txt: socket"]),
        ("depth 33", H + "/deep", lambda x: x == [deep + ": deeper than 32"]),
        ("20,001 files", H + "/many", lambda x: len(x) == 1 and x[0].startswith("home/agent/many/f")
         and x[0].endswith(": more than 20000 files")),
        ("257 MiB (sparse)", H + "/big", lambda x: x == ["home/agent/big/blob: submission larger than 256 MiB"]),
    ]
    for i, (name, path, want) in enumerate(attacks):
        vid = newid("at%d" % i)
        t0 = time.time()
        res, prog = collect(vid, [H + "/answer/answer.txt", path])
        took = time.time() - t0
        p = res and res.get("payload") or {}
        t.ok(res and res["ok"] and want(p.get("refused")) and p.get("missing") == [],
             "%s: refused with the exact reason %s (%.1f s)" % (name, p.get("refused"), took), res)
        t.ok(not os.path.exists(os.path.join(vdir(vid), "submission")), "%s: the whole copy is deleted" % name)
        # As the control plane sends it (refused: true), and once as if it had
        # forgotten (refused: false): collect.json still stops the grader.
        for flag in (True, False):
            res, _ = run(vid, {"image": "denv-test/busybox", "command": grader("/home/agent/answer/answer.txt")},
                         refused=flag)
            t.ok(res and res["ok"] and res["payload"]["reward"] == 0 and res["payload"]["source"] == "refused",
                 "%s: reward 0, source refused (refused: %s)" % (name, flag), res)
        t.ok(not os.path.exists(os.path.join(vdir(vid), "logs", "ran")), "%s: the grader never ran" % name)

    # ---- just inside the limits ----
    for name, path in (("depth 32", H + "/deep32"), ("1 MiB sparse file", H + "/bigok")):
        vid = newid("in")
        res, _ = collect(vid, [path])
        t.ok(res and res["ok"] and res["payload"]["refused"] == [], "%s is accepted" % name, res)
        res, _ = run(vid, {"image": "denv-test/busybox", "command": ["sh", "-c", "echo 1"]})
        t.ok(res and res["ok"] and res["payload"]["reward"] == 1, "%s: the grader runs" % name, res)

    # ---- service verifier: inside judge, as root ----
    vid = newid("sv")
    res, _ = collect(vid, [H + "/answer/answer.txt"])
    cmd = ["sh", "-c", "touch /logs/verifier/ran; id -u > /logs/verifier/uid; "
           "echo \"$SUBMISSION $DENV_VERIFY_ID\" > /logs/verifier/env; "
           "if [ \"$(cat /submission/home/agent/answer/answer.txt)\" = 42 ]; then echo 1; else echo 0; fi "
           "> /logs/verifier/reward.txt; echo 0.25"]
    res, prog = run(vid, {"service": "judge", "command": cmd, "timeout_sec": 60})
    t.ok(res and res["ok"] and res["payload"]["reward"] == 1 and res["payload"]["source"] == "reward.txt",
         "service verifier: reward.txt copied back (1, not stdout's 0.25)", res)
    t.ok("grading inside service judge" in prog, "progress: grading inside service judge", prog)
    inside = docker("exec", judge, "sh", "-c", "cat /logs/verifier/uid /logs/verifier/env "
                    "/submission/home/agent/answer/answer.txt").stdout
    t.ok(inside == "0\n/submission %s\n42\n" % vid, "inside judge: uid 0, env, the copy at /submission", inside)
    t.ok(logf("reward.txt", os.path.join(vdir(vid), "logs")) == "1", "reward.txt kept in the logs directory")

    # ---- timeout ----
    vid = newid("to")
    res, _ = collect(vid, [H + "/answer/answer.txt"])
    t0 = time.time()
    res, _ = run(vid, {"image": "denv-test/busybox", "command": ["sh", "-c", "sleep 60; echo 1"], "timeout_sec": 2})
    took = time.time() - t0
    t.ok(res and res["ok"] is False and "timeout_sec (2 s)" in res.get("error", "") and took < 20,
         "a verifier sleeping past timeout_sec fails the grade (%.1f s)" % took, res)
    left = docker("ps", "-aq", "--filter", "label=ai.denv.verify=" + vid).stdout.strip()
    t.ok(left == "", "the verifier container was killed and removed", left)

    # ---- bad payloads ----
    res, _ = collect(newid("bp"), ["relative/path"])
    t.ok(res and res["ok"] is False and "must be absolute" in res["error"], "a relative collect path is an error", res)
    res, _ = run(newid("bp"), {"image": "denv-test/busybox", "command": ["true"]})
    t.ok(res and res["ok"] is False and "nothing was collected" in res["error"], "run without collect is an error", res)

    # ---- resume: the agent's process was frozen, not killed ----
    t.ok(docker("unpause", box).returncode == 0, "resume (docker unpause, as the snapshot does without keep_paused)")
    time.sleep(1.5)
    t.ok(host_file("bg/answer.txt") == "42\n", "after resume the background process runs on", host_file("bg/answer.txt"))
    r = ex("box", ["cat", H + "/answer/answer.txt"])
    t.ok(r and r["ok"] and r["payload"]["exit_code"] == 0 and r["payload"]["stdout"] == "42\n", "exec works again", r)
finally:
    try:
        cp.command("env.destroy", env, {}, timeout=120)
    except Exception:   # no sidecar connected: remove_project below still cleans Docker
        pass
    remove_project(project)
    c, n = docker_leftovers(project)
    t.ok(not c and not n, "no containers or network left", (c, n))
    d.kill()
    if t.failed:
        t.diag("denvd log tail:\n" + d.logtext()[-1500:])
    sys.exit(t.done())
