"""x-denv.runtime on real Docker through denvd and the fake control plane:
one service under gVisor (runsc), one under runc, on one internal network.
The hello reports the runtimes; the gVisor service runs under runsc (its
kernel is gVisor's, not the host's), keeps its caps, its non-root user and
its dropped capabilities, reaches the runc service by name, and egress is
still denied (verified by the netns probe). A clock with gVisor is refused
with the reason."""
import io
import json
import os
import secrets
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, docker, docker_leftovers, remove_project  # noqa: E402

binary, tmp = sys.argv[1], sys.argv[2]
t = TAP()
env = "env_GV" + secrets.token_hex(5).upper()
project = env.lower()
cp = FakeCP()
d = Denvd(binary, tmp, cp.url, token=cp.token,
          extra=["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"])
spec = {
    "version": "ver_gv", "egress": "deny", "volumes": ["home"], "warm": [],
    "services": [
        {"name": "box", "image": "denv-test/debian", "user": "1000:1000", "command": ["sleep", "3600"],
         "env": {"HOME": "/home/agent"}, "volumes": ["home:/home/agent"], "depends_on": [], "ports": [],
         "runtime": "gvisor", "resources": {"memory_mb": 1024, "pids": 64, "cpus": 1}},
        {"name": "side", "image": "denv-test/debian", "user": "", "depends_on": [], "ports": ["8000"],
         "command": ["python3", "-m", "http.server", "8000"], "env": {}, "volumes": [],
         "resources": {"memory_mb": 128, "pids": 64, "cpus": 1}},
    ],
}


def ex(svc, cmd, timeout=60):
    res, _, _, _ = cp.command("env.exec", env, {"service": svc, "cmd": cmd, "timeout_sec": timeout})
    return res["payload"] if res and res.get("ok") else {"error": res}


try:
    d.start()
    t.ok(cp.wait_conn(15), "denvd joins", d.logtext())
    caps = (cp.hellos[-1].get("payload") or {}).get("capabilities", {}) if cp.hellos else {}
    t.ok(caps.get("runtimes") == ["runc", "gvisor"] and caps.get("runtime") == "runc",
         "hello reports the runtimes (runc, gvisor) and the default", caps)
    t0 = time.time()
    res, prog, _, _ = cp.command("env.create", env, spec, timeout=240)
    t.diag("env.create (one gVisor service, one runc) took %.1f s" % (time.time() - t0))
    if not t.ok(res and res["ok"], "env.create with a gVisor service", (res, d.logtext()[-2000:])):
        raise SystemExit(t.done())
    p = res["payload"]
    t.ok(p.get("runtime") == {"box": "gvisor", "side": "runc"}, "the evidence names each service's runtime", p)
    t.ok(p.get("egress") == "denied (verified)" and p.get("egress_probe", {}).get("method") == "netns",
         "egress denied, verified by the netns probe", p)
    ins = json.loads(docker("inspect", project + "-box-1", project + "-side-1").stdout or "[]")
    rts = [c.get("HostConfig", {}).get("Runtime") for c in ins]
    t.ok(rts == ["runsc", "runc"], "Docker runs box under runsc, side under runc", rts)
    hc = ins[0].get("HostConfig", {}) if ins else {}
    # The host pid cap also holds the sandbox's own threads (denvd(8),
    # GVISOR): 64 + 10 per process of the service's cap of 64.
    t.ok(hc.get("Memory") == 1024 << 20 and hc.get("PidsLimit") == 64 + 10 * 64 and hc.get("NanoCpus") == 10 ** 9,
         "the gVisor service keeps its caps (the host pid cap scaled for the sandbox's threads)", hc)
    comp = open(os.path.join(d.data, "envs", env, "compose.yaml")).read()
    t.ok("runtime: runsc" in comp, "compose.yaml says runtime: runsc", comp)
    r = ex("box", ["sh", "-c", "id -u; uname -r; grep CapEff /proc/self/status"])
    out = r.get("stdout", "").split("\n")
    t.ok(out[0] == "1000", "exec in the gVisor service runs as uid 1000", r)
    t.ok(len(out) > 1 and out[1] != os.uname().release, "its kernel is gVisor's, not the host's", (out, os.uname()))
    t.ok(len(out) > 2 and out[2].split() == ["CapEff:", "0000000000000000"], "no effective capabilities", r)
    r = ex("box", ["sh", "-c", "echo 42 > ~/answer.txt && cat ~/answer.txt"])
    hv = os.path.join(d.data, "envs", env, "vol", "home")
    t.ok(r.get("stdout") == "42\n" and os.path.exists(hv + "/answer.txt") and os.stat(hv + "/answer.txt").st_uid == 1000,
         "the home volume is written through gVisor's gofer as uid 1000", (r, hv))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        data = b"put through gVisor\n"
        ti = tarfile.TarInfo("note.txt")
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    res = cp.put(env, "box", "/home/agent/up", buf.getvalue())[0]
    r = ex("box", ["cat", "/home/agent/up/note.txt"])
    t.ok(res and res.get("ok") and r.get("stdout") == "put through gVisor\n",
         "env.put into a new directory of the non-root gVisor service", (res, r))
    r = ex("box", ["python3", "-c", "import socket; s=socket.socket(); s.settimeout(3)\n"
                   "try:\n s.connect(('1.1.1.1', 80)); print('reached')\nexcept OSError as e: print('blocked')"])
    t.ok(r.get("stdout") == "blocked\n", "from inside gVisor the internet is not reachable (seen, not from denvd's exec)", r)
    r = ex("box", ["python3", "-c", "import urllib.request as u; print(u.urlopen('http://side:8000/', timeout=5).status)"])
    t.ok(r.get("stdout") == "200\n", "the gVisor service reaches the runc service by name",
         docker("inspect", "--format", "{{json .State}}", project + "-box-1").stdout)

    # A fork bomb under gVisor, last: past the host cap a clone fails and
    # runsc ends the whole sandbox (exit 2) instead of refusing the 65th
    # process inside, so the guest's own cap is a known failure (TODO).
    t0 = time.time()
    r = ex("box", ["sh", "-c", "for i in $(seq 200); do sleep 30 & done 2>/dev/null; sleep 1; "
                   "ps -e --no-headers | wc -l; kill $(jobs -p) 2>/dev/null; true"], timeout=30)
    t.diag("the fork bomb's exec answered in %.1f s" % (time.time() - t0))
    n = int(r.get("stdout", "0").strip() or 0)
    t.todo(0 < n <= 64, "200 processes under gVisor stop at the pids cap (64)", r)
    # When the sandbox ends, dockerd either leaves the exec's stream open
    # (denvd notices the container stopped and says so, rather than waiting
    # out the command's timeout) or closes it with runsc's own word for it
    # (exit 128, "WaitPID failed: EOF"); which comes first is a race.
    t.ok(0 < n <= 64 or "the container ended while the command ran" in json.dumps(r) or
         (r.get("exit_code") == 128 and "WaitPID\" failed: EOF" in r.get("stderr", "")),
         "the fork bomb's exec answers: capped inside, or the sandbox's end named", r)
    r = ex("side", ["true"])   # whatever became of box
    t.ok(r.get("exit_code") == 0, "the runc service still answers", r)

    res, _, _, _ = cp.command("env.destroy", env, {}, timeout=120)
    c, n = docker_leftovers(project)
    t.ok(res and res["ok"] and not c and not n, "env.destroy removes the gVisor stack", (res, c, n))

    env2 = env + "C"
    clocked = dict(spec, clock={"mode": "frozen", "at": "2026-01-01T00:00:00Z"})
    res, _, _, _ = cp.command("env.create", env2, clocked, timeout=120)
    t.ok(res and not res["ok"] and "x-denv.clock cannot be checked under runtime gvisor" in
         json.dumps(res.get("error", "")), "a frozen clock with gVisor is refused with the reason", res)
    c, n = docker_leftovers(env2.lower())
    t.ok(not c and not n, "and nothing is left of it", (c, n))
finally:
    d.kill()
    remove_project(project)
    remove_project((env + "C").lower())
sys.exit(t.done())
