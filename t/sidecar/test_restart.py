"""Killing denvd mid-command and starting it again: the control plane
re-delivers the command and gets exactly one answer, from the log or by the
command finishing; an exec never runs twice."""
import os
import secrets
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, docker_leftovers, remove_project  # noqa: E402

binary, tmp = sys.argv[1], sys.argv[2]
t = TAP()
cp = FakeCP()
d = Denvd(binary, tmp, cp.url, token=cp.token,
          extra=["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"])
env = "env_RS" + secrets.token_hex(4).upper()
env2 = "env_RC" + secrets.token_hex(4).upper()
box = {"name": "box", "image": "denv-test/busybox", "command": ["sleep", "3600"], "env": {}, "ports": [],
       "volumes": [], "depends_on": [], "user": "1000:1000", "resources": {"memory_mb": 64, "pids": 64, "cpus": 0.5}}


def workers(pid):
    r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(x) for x in r.stdout.split()]


def restart():
    d.start("run")
    return cp.wait_conn(15)


def count():
    r, _, _, _ = cp.command("env.exec", env, {"service": "box", "cmd": ["sh", "-c", "cat /tmp/count 2>/dev/null | wc -l"]})
    return r["payload"]["stdout"].strip() if r and r["ok"] else "?"


try:
    d.start("join")
    t.ok(cp.wait_conn(15), "denvd joins")
    res, _, _, _ = cp.command("env.create", env, {"services": [box], "volumes": [], "egress": "deny"}, timeout=120)
    t.ok(res and res["ok"], "environment created", res)

    # 1. denvd dies, its worker lives on: the re-delivered command is answered once, when it finishes.
    cid = "cmd_k1" + secrets.token_hex(4)
    cp.send({"type": "command", "command_id": cid, "kind": "env.exec", "env_id": env,
             "payload": {"service": "box", "cmd": ["sh", "-c", "echo run >> /tmp/count; sleep 3; echo done"]}})
    t.ok(cp.next(lambda f: f.get("command_id") == cid and f["type"] == "ack", 10) is not None, "exec acked")
    time.sleep(1)
    d.kill(signal.SIGKILL)
    cp.closed.wait(10)
    t.ok(restart(), "denvd restarted")
    cp.drain()
    res, _, acks, _ = cp.command("env.exec", env, {"service": "box", "cmd": ["never-run"]}, cid=cid, timeout=60)
    t.ok(res and res["ok"] and res["payload"]["stdout"] == "done\n",
         "re-delivered after the kill: answered by the worker that kept running", (res, d.logtext()[-1500:]))
    time.sleep(0.5)
    extra = [f for f in cp.drain() if f.get("command_id") == cid and f["type"] == "result"]
    t.ok(not extra, "exactly one result", extra)
    t.ok(count() == "1", "the command ran once")
    res2, _, _, _ = cp.command("env.exec", env, {"service": "box", "cmd": ["never-run"]}, cid=cid, timeout=30)
    t.ok(res2 == res or (res2 and res2.get("payload") == res.get("payload")) and count() == "1",
         "a third delivery is answered from the log")

    # 2. denvd and its worker both die: an exec is reported, never run again.
    cid = "cmd_k2" + secrets.token_hex(4)
    cp.send({"type": "command", "command_id": cid, "kind": "env.exec", "env_id": env,
             "payload": {"service": "box", "cmd": ["sh", "-c", "echo run >> /tmp/count; sleep 20"]}})
    cp.next(lambda f: f.get("command_id") == cid and f["type"] == "ack", 10)
    time.sleep(1)
    ws = workers(d.proc.pid)
    d.kill(signal.SIGKILL)
    for w in ws:
        try:
            os.killpg(w, signal.SIGKILL)    # the worker leads its own process group
        except ProcessLookupError:
            pass
    cp.closed.wait(10)
    t.ok(ws and restart(), "denvd and its worker killed; denvd restarted")
    res, _, _, _ = cp.command("env.exec", env, {"service": "box", "cmd": ["never-run"]}, cid=cid, timeout=30)
    t.ok(res and res["ok"] is False and "interrupted by a denvd restart" in res["error"] and
         "not run again" in res["error"], "an interrupted exec is reported, not run again", res)
    t.ok(count() == "2", "it ran only the first time")

    # 3. A create cut off with its worker is finished by running it to completion.
    cid = "cmd_k3" + secrets.token_hex(4)
    spec = {"services": [dict(box, name="app")], "volumes": [], "egress": "deny"}
    cp.send({"type": "command", "command_id": cid, "kind": "env.create", "env_id": env2, "payload": spec})
    cp.next(lambda f: f.get("command_id") == cid and f["type"] == "progress" and "starting" in f["message"], 30)
    ws = workers(d.proc.pid)
    d.kill(signal.SIGKILL)
    for w in ws:
        try:
            os.killpg(w, signal.SIGKILL)
        except ProcessLookupError:
            pass
    cp.closed.wait(10)
    t.ok(restart(), "denvd restarted after a cut-off create")
    res, _, _, _ = cp.command("env.create", env2, spec, cid=cid, timeout=120)
    t.ok(res and res["ok"] and res["payload"]["egress"] == "denied (verified)",
         "the re-delivered create runs to completion", (res, d.logtext()[-1500:]))
    for e in (env, env2):
        res, _, _, _ = cp.command("env.destroy", e, {}, timeout=60)
        c, n = docker_leftovers(e.lower())
        t.ok(res and res["ok"] and not c and not n, "destroy %s leaves nothing" % e, (res, c, n))
finally:
    d.kill()
    remove_project(env.lower())
    remove_project(env2.lower())
sys.exit(t.done())
