"""The protections table's suite: the five protections and Karotte's
documented attacks against one environment, under one runtime and one
storage (argv: denvd, tmp, runtime runc|gvisor, storage dir|btrfs, then
denvd's extra flags). Each row is a TAP point whose name starts with the
row's key and a colon ("symlink: ..."); t/protections.sh builds the table
from them. An agent (uid 1000, debian) with a 64 MiB disk cap, a 64-pid cap
and its home volume; egress denied."""
import json
import os
import secrets
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, docker, remove_project  # noqa: E402

binary, tmp, runtime, storage = sys.argv[1:5]
extra = sys.argv[5:]
t = TAP()
env = "env_PR" + secrets.token_hex(5).upper()
project = env.lower()
box = project + "-box-1"
cp = FakeCP()
d = Denvd(binary, tmp, cp.url, token=cp.token, extra=["--probe-image", "denv-test/busybox", "--probe-url",
                                                     "http://127.0.0.1:9/", "--runtime", runtime] + extra)
H = "/home/agent"
spec = {"version": "ver_pr", "egress": "deny", "volumes": ["home"], "warm": [],
        "services": [{"name": "box", "image": "denv-test/debian", "user": "1000:1000", "command": ["sleep", "3600"],
                      "env": {"HOME": H}, "volumes": ["home:" + H], "depends_on": [], "ports": [],
                      "resources": {"memory_mb": 256, "pids": 64, "cpus": 1}}]}
spec["disk_mb"] = 64
NEST = "for i in $(seq %d); do mkdir d && cd d || exit 1; done; echo 42 > answer.txt"


def wait_for(cond, limit):
    """cond() within limit seconds (polled every 0.2 s)."""
    end = time.time() + limit
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.2)
    return cond()


def alive():
    """False once the agent's container has ended (under gVisor its sandbox
    can): every check after that fails at once instead of waiting out an
    exec that dockerd never finishes."""
    return docker("inspect", "--format", "{{.State.Status}}", box).stdout.strip() in ("running", "paused")


def sh(script, timeout=30):
    if not alive():
        return {"error": "the agent's container has ended: " +
                docker("inspect", "--format", "{{json .State}}", box).stdout.strip()}
    res, _, _, _ = cp.command("env.exec", env, {"service": "box", "cmd": ["sh", "-c", script],
                                                "timeout_sec": timeout}, timeout=timeout + 30)
    return res["payload"] if res and res.get("ok") else {"error": (res or {}).get("error")}


def collect(paths):
    vid = "vrf_" + secrets.token_hex(6)
    if not alive():
        return {"error": "the agent's container has ended"}, vid
    res, _, _, _ = cp.command("verify.collect", env, {"id": vid, "agent_service": "box", "collect": paths},
                              timeout=180)
    docker("unpause", box)
    return (res or {}).get("payload") or {"error": (res or {}).get("error")}, vid


def refused(case, script, path, why, sandboxed=False):
    """sandboxed: gVisor keeps what it makes inside its sandbox (a FIFO, a
    socket): the host, where collect looks, never sees it, so it is missing
    and the grader gets nothing."""
    r = sh("cd ~ && rm -rf case && mkdir case && cd case && " + script)
    p, _ = collect([H + "/case/" + path])
    ok = bool(p.get("refused")) and not p.get("error")
    if sandboxed and runtime == "gvisor":
        ok = ok or (p.get("missing") == [H + "/case/" + path] and not p.get("files") and not p.get("error"))
        why += " (under gVisor: it never leaves the sandbox, so it is missing)"
    t.ok(ok, "%s: %s" % (case, why), (r, p))


try:
    d.start()
    t.ok(cp.wait_conn(15), "setup: denvd joins", d.logtext())
    res, prog, _, _ = cp.command("env.create", env, spec, timeout=300)
    if not t.ok(res and res["ok"], "setup: the environment comes up (%s, %s)" % (runtime, storage),
                (res, d.logtext()[-1500:])):
        raise SystemExit(t.done())
    p = res["payload"]
    rt = docker("inspect", "--format", "{{.HostConfig.Runtime}}", box).stdout.strip()
    t.ok(rt == ("runsc" if runtime == "gvisor" else "runc"), "setup: Docker runs it under %s" % rt)
    # 1. answer key: nothing of the grader is in the agent's container.
    mounts = json.loads(docker("inspect", "--format", "{{json .Mounts}}", box).stdout or "[]")
    home = mounts[0].get("Source", "") if mounts else ""   # the home volume on the host, for any storage
    t.ok([m.get("Destination") for m in mounts] == [H], "answer-key: the agent sees only its own volume", mounts)
    # non-root: the agent is uid 1000 with no effective capabilities.
    r = sh("id -u; grep CapEff /proc/self/status")
    t.ok(r.get("stdout", "").split() == ["1000", "CapEff:", "0000000000000000"], "non-root: uid 1000, no capabilities", r)
    # 5. online: egress denied, verified by the probe, and from inside.
    t.ok(p.get("egress") == "denied (verified)", "egress: denied (verified) by the %s probe"
         % p.get("egress_probe", {}).get("method"), p)
    # 4. resources: the caps are on the container; a fork bomb meets the pid cap.
    hc = json.loads(docker("inspect", "--format", "{{json .HostConfig}}", box).stdout or "{}")
    # Under gVisor the host's cap also holds the sandbox's own threads (denvd(8) GVISOR).
    pids = 64 + 64 * 10 if runtime == "gvisor" else 64
    t.ok(hc.get("Memory") == 256 << 20 and hc.get("PidsLimit") == pids, "caps: memory and pids caps set", hc)
    # 3. weird answer files.
    refused("symlink", "ln -s /etc/passwd answer.txt", "answer.txt", "a symlink answer is refused")
    refused("fifo", "mkfifo answer.txt", "answer.txt", "a FIFO answer is refused", sandboxed=True)
    refused("socket", "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"answer.txt\")'",
            "answer.txt", "a socket answer is refused", sandboxed=True)
    r = sh("cd ~ && rm -rf case && mkdir case && mknod case/answer.txt c 1 3 2>&1; ls -l case")
    p, _ = collect([H + "/case/answer.txt"])
    t.ok("Operation not permitted" in r.get("stdout", "") or bool(p.get("refused")),
         "device: the agent cannot make one, and one would be refused", (r, p))
    refused("sparse", "truncate -s 100G answer.txt", "answer.txt", "a sparse 100 GB answer is refused")
    refused("deep", NEST % 258, "d", "258 nested directories are refused, not an error")
    # hardlink: the collected copy is a copy, not the agent's inode.
    r = sh("cd ~ && rm -rf case && mkdir case && echo 42 > case/orig && ln case/orig case/answer.txt")
    p, vid = collect([H + "/case/answer.txt"])
    sub = os.path.join(d.data, "verify", vid)
    found = [os.path.join(a, f) for a, _, fs in os.walk(sub) for f in fs if f == "answer.txt"]
    vol = os.path.join(home, "case", "orig")
    same = bool(found) and os.path.exists(vol) and os.stat(found[0]).st_ino == os.stat(vol).st_ino
    t.ok(not p.get("error") and found and not same, "hardlink: the grader gets a copy, not the agent's file",
         (p, found))
    # plants: files that would run as root if anything of denvd sourced them.
    marker = "/tmp/pwned-" + secrets.token_hex(4)
    sh("mkdir -p ~/bin && printf '#!/bin/sh\\ntouch %s\\n' > ~/bin/cat && chmod +x ~/bin/cat && "
       "echo 'touch %s' > ~/.bashrc && cp ~/.bashrc ~/.profile && "
       "echo 'export LD_PRELOAD=/home/agent/evil.so PATH=/home/agent/bin:$PATH' >> ~/.bashrc && "
       "echo 42 > ~/answer.txt" % (marker, marker))
    p, _ = collect([H + "/answer.txt", H + "/.bashrc", H + "/bin"])
    cp.get(env, "box", H + "/answer.txt")
    r = sh("ls %s 2>/dev/null || echo absent" % marker)
    t.ok(not p.get("error") and r.get("stdout") == "absent\n",
         "plants: PATH, LD_PRELOAD and .bashrc plants never run in collect or denvd's own commands", (p, r))
    # 2. tampering with grading: a background writer is frozen by collect.
    sh("cd ~ && (while :; do echo x >> ~/bg.txt; sleep 0.05; done) >/dev/null 2>&1 &")
    time.sleep(0.5)
    vid = "vrf_" + secrets.token_hex(6)
    res, _, _, _ = cp.command("verify.collect", env, {"id": vid, "agent_service": "box", "collect": [H + "/bg.txt"]},
                              timeout=180) if alive() else (None, 0, 0, 0)
    bg = os.path.join(home, "bg.txt")
    s1 = os.path.getsize(bg) if os.path.exists(bg) else -1
    time.sleep(1)
    s2 = os.path.getsize(bg) if os.path.exists(bg) else -2
    paused = docker("inspect", "--format", "{{.State.Paused}}", box).stdout.strip()
    t.ok(res and res.get("ok") and paused == "true" and s1 == s2,
         "background-writer: collect freezes the agent; nothing is written while it is (%d, %d bytes)" % (s1, s2),
         (res, paused))
    docker("unpause", box)
    # disk fill: the write stops at the env's cap, and verify still gives a score.
    r = sh("echo 42 > ~/answer.txt; dd if=/dev/zero of=$HOME/fill bs=1M count=200 2>&1 | grep -c 'No space\\|quota exceeded'")
    p, _ = collect([H + "/answer.txt"])
    t.ok(r.get("stdout", "").strip() == "1" and not p.get("error"),
         "disk-fill: the write stops at the environment's cap; collect answers (%s)" %
         (json.dumps(p.get("refused")) if p.get("refused") else "collected"), (r, p))
    # Last, as its processes take a while to go.
    r = sh("python3 -c 'import os, time\nn = 0\nfor i in range(200):\n    try:\n        pid = os.fork()\n"
           "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(3)\n        os._exit(0)\n"
           "    n += 1\nprint(n)'", timeout=90)
    n = r.get("stdout", "").strip()
    # The exec can answer (runsc's "WaitPID failed: EOF", exit 128) a moment
    # before Docker marks the ended sandbox's container exited: wait for it.
    ended = runtime == "gvisor" and not n.isdigit() and wait_for(lambda: not alive(), 30)
    if ended:
        # runsc ends the whole sandbox when the host's cap stops a clone
        # (denvd(8) GVISOR): the cap held; the agent ended its own box, and
        # a verify of it must score 0 rather than fail.
        vid = "vrf_" + secrets.token_hex(6)
        res, _, _, _ = cp.command("verify.collect", env, {"id": vid, "agent_service": "box",
                                                          "collect": [H + "/answer.txt"]}, timeout=180)
        p = (res or {}).get("payload") or {}
        t.ok(res and res.get("ok") and any("container ended" in x for x in p.get("refused", [])),
             "fork-bomb: 200 forks stop at the 64-pid cap (under gVisor: the sandbox ends, and collect "
             "refuses it: a 0)", res)
    else:
        t.ok(n.isdigit() and 32 < int(n) < 64, "fork-bomb: 200 forks stop at the 64-pid cap (%s made)" % n, r)
    cp.command("env.destroy", env, {}, timeout=120)
finally:
    d.kill()
    remove_project(project)
    vol = os.path.join(d.data, "envs", env, "vol")
    if os.path.ismount(vol):
        os.system("umount " + vol)
sys.exit(t.done())
