"""The snapshot's freeze through the cgroup freezer (src/sidecar/freeze.c),
on real Docker, dir backend (argv: denvd, tmp dir).

1. Plain snapshots of a one-service busybox env and of a two-service env
   (one with a healthcheck): everything running and unfrozen after, no
   record left, frozen_for reported; the env.snapshot round trip is printed
   as a figure (the one-service env's, median of several).
2. Crash safety: with DENVD_TEST_FROZEN_SLEEP_MS the worker sleeps inside
   the frozen window. The test kills it there (SIGKILL): the containers stay
   frozen (docker still says "running") and <data>/envs/<env>/frozen lists
   them. The next command for the env thaws them first: an env.exec answers.
3. The same kill, and denvd killed too: denvd's start-up thaws them before
   any command arrives.

TIMING_ONLY=1 runs part 1 alone (to measure an older binary)."""
import json
import os
import secrets
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, docker, docker_leftovers, remove_project  # noqa: E402

binary, tmp = sys.argv[1], sys.argv[2]
timing_only = os.environ.get("TIMING_ONLY") == "1"
runs = int(os.environ.get("SNAP_RUNS", "7"))
t = TAP()
tag = secrets.token_hex(4).upper()
ONE, TWO = "env_FZ1" + tag, "env_FZ2" + tag
envs = [ONE, TWO]
cp = FakeCP()
d = Denvd(binary, tmp, cp.url, token=cp.token,
          extra=["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"])


def box(name, health=False, vol=None):
    s = {"name": name, "image": "denv-test/busybox", "command": ["sleep", "3600"], "env": {}, "ports": [],
         "volumes": [vol + ":/data"] if vol else [], "depends_on": [], "user": "",
         "resources": {"memory_mb": 64, "pids": 64, "cpus": 0.5}}
    if health:
        s["health"] = {"test": ["CMD", "true"], "interval": "1s", "retries": 30}
    return s


spec1 = {"version": "ver_fz1", "egress": "deny", "volumes": ["v"], "warm": [], "services": [box("a", vol="v")]}
spec2 = {"version": "ver_fz2", "egress": "deny", "volumes": ["v", "w"], "warm": [],
         "services": [box("a", vol="v"), box("b", health=True, vol="w")]}


def cname(env, svc):
    return env.lower() + "-" + svc + "-1"


def freezer_file(env, svc):
    """(version, file) of the container's freezer: v1 freezer.state or v2 cgroup.events."""
    pid = docker("inspect", "--format", "{{.State.Pid}}", cname(env, svc)).stdout.strip()
    try:
        lines = open("/proc/%s/cgroup" % pid).read().splitlines()
    except OSError:
        return None, None
    mounts = [ln.split() for ln in open("/proc/self/mountinfo")]
    for want in (1, 2):
        for ln in lines:
            hid, ctl, path = ln.split(":", 2)
            if want == 1 and "freezer" not in ctl.split(","):
                continue
            if want == 2 and hid != "0":
                continue
            for m in mounts:
                dash = m.index("-")
                fs = m[dash + 1]
                if (want == 1 and fs == "cgroup" and "freezer" in m[dash + 3].split(",")) or \
                        (want == 2 and fs == "cgroup2"):
                    rel = path[len(m[3]):] if m[3] != "/" else path
                    return want, m[4] + rel + ("/freezer.state" if want == 1 else "/cgroup.events")
    return None, None


def freezer_state(env, svc):
    """FROZEN, THAWED (or FREEZING) as the kernel says."""
    v, f = freezer_file(env, svc)
    if not f:
        return "<no freezer>"
    try:
        text = open(f).read()
    except OSError as e:
        return "<%s>" % e
    if v == 1:
        return text.strip()
    return "FROZEN" if "frozen 1" in text else "THAWED"


def thaw(env, svc):
    """Cleanup after a failed run: a frozen container cannot be removed."""
    v, f = freezer_file(env, svc)
    if f:
        with open(f if v == 1 else os.path.join(os.path.dirname(f), "cgroup.freeze"), "w") as fh:
            fh.write("THAWED" if v == 1 else "0")


def status(env, svc):
    return docker("inspect", "--format", "{{.State.Status}}", cname(env, svc)).stdout.strip()


def record(env):
    return os.path.join(d.data, "envs", env, "frozen")


def snapshot(env, name):
    t0 = time.time()
    res, prog, _, _ = cp.command("env.snapshot", env, {"name": name}, timeout=120)
    return res, prog, time.time() - t0


def echo(env, svc, word, timeout=30):
    res, _, _, _ = cp.command("env.exec", env, {"service": svc, "cmd": ["echo", word], "timeout_sec": 20},
                              timeout=timeout)
    return res


def worker_pids():
    r = subprocess.run(["pgrep", "-P", str(d.proc.pid)], capture_output=True, text=True)
    out = []
    for p in r.stdout.split():
        try:
            if b"__worker" in open("/proc/%s/cmdline" % p, "rb").read():
                out.append(int(p))
        except OSError:
            pass
    return out


def frozen_by_hook(env, name):
    """Start a snapshot that sleeps while frozen; the worker's pid once it is there."""
    cid = "cmd_fz" + secrets.token_hex(4)
    cp.send({"type": "command", "command_id": cid, "kind": "env.snapshot", "env_id": env, "payload": {"name": name}})
    f = None
    end = time.time() + 60
    while time.time() < end:
        f = cp.next(lambda x: x.get("command_id") == cid and x.get("type") == "progress", end - time.time())
        if f:
            t.diag("progress: " + f.get("message", ""))
        if not f or "test hook" in f.get("message", ""):
            break
    return cid, (worker_pids() if f else [])


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None


try:
    d.start()
    t.ok(cp.wait_conn(15), "denvd joins", d.logtext())
    for env, spec in ((ONE, spec1), (TWO, spec2)):
        res, prog, _, _ = cp.command("env.create", env, spec, timeout=180)
        if not t.ok(res and res["ok"], "env.create %s (%d service(s))" % (env, len(spec["services"])),
                    (res, prog, d.logtext()[-2000:])):
            raise SystemExit(1)

    # ---- 1. plain snapshots, and the figure ----
    took, frozen = [], []
    good = True
    for i in range(runs):
        res, prog, dt = snapshot(ONE, "ver_one%d" % i)
        good = good and bool(res and res["ok"])
        if res and res["ok"]:
            took.append(dt * 1000)
            frozen.append(res["payload"].get("frozen_ms", 0))
    t.ok(good and status(ONE, "a") == "running", "%d snapshots of the one-service env" % runs, (res, prog))
    t.diag("figure: env.snapshot of a one-service busybox env (dir), command round trip: median %.0f ms "
           "(min %.0f, max %.0f; frozen_ms median %s) over %d runs" %
           (median(took), min(took or [0]), max(took or [0]), median(frozen), len(took)))
    res, prog, dt = snapshot(TWO, "ver_two")
    p = (res or {}).get("payload") or {}
    t.diag("\n".join(prog))
    t.ok(res and res["ok"] and p.get("consistent") is True and isinstance(p.get("frozen_for"), str) and
         len(p.get("datasets", [])) == 2, "two services, one with a healthcheck: snapshot (frozen for %s, %.0f ms)"
         % (p.get("frozen_for"), dt * 1000), (res, prog))
    if timing_only:
        raise SystemExit(0)
    st = [(s, status(TWO, s), freezer_state(TWO, s)) for s in ("a", "b")]
    t.ok(all(x[1] == "running" and x[2] == "THAWED" for x in st) and not os.path.exists(record(TWO)),
         "after it: running, thawed, no freeze record left", st)

    # ---- 2. the worker killed while frozen; the next command thaws ----
    d.kill()
    os.environ["DENVD_TEST_FROZEN_SLEEP_MS"] = "120000"
    d.start("run")
    t.ok(cp.wait_conn(15), "denvd restarted with the frozen-window test hook", d.logtext()[-1000:])
    cid, pids = frozen_by_hook(TWO, "ver_crash1")
    t.ok(len(pids) == 1, "the snapshot's worker sleeps inside the frozen window", (pids, d.logtext()[-2000:]))
    st = [(s, status(TWO, s), freezer_state(TWO, s)) for s in ("a", "b")]
    rec = open(record(TWO)).read() if os.path.exists(record(TWO)) else None
    t.ok(all(x[1] == "running" and x[2] == "FROZEN" for x in st) and rec and len(rec.splitlines()) == 2,
         "frozen by the cgroup freezer (docker still says running); the record lists both cgroups", (st, rec))
    for p_ in pids:
        os.kill(p_, signal.SIGKILL)
    r = cp.collect(cid, 30)[0]
    t.ok(r and not r["ok"] and "died" in r.get("error", ""), "the killed worker's snapshot fails", r)
    st = [(s, freezer_state(TWO, s)) for s in ("a", "b")]
    t.ok(all(x[1] == "FROZEN" for x in st) and os.path.exists(record(TWO)),
         "the containers are still frozen and the record stays (nobody thawed them yet)", st)
    res = echo(TWO, "b", "alive")
    t.ok(res and res["ok"] and res["payload"]["stdout"] == "alive\n",
         "the next command for the env thaws first: env.exec answers", (res, d.logtext()[-2000:]))
    st = [(s, status(TWO, s), freezer_state(TWO, s)) for s in ("a", "b")]
    t.ok(all(x[1] == "running" and x[2] == "THAWED" for x in st) and not os.path.exists(record(TWO)),
         "both thawed and running, the record removed", st)
    t.ok("frozen by a snapshot whose worker died" in d.logtext(), "the thaw is logged")

    # ---- 3. worker and denvd both killed: the start-up thaws ----
    cid, pids = frozen_by_hook(ONE, "ver_crash2")
    t.ok(len(pids) == 1 and freezer_state(ONE, "a") == "FROZEN", "frozen again (one-service env)", pids)
    d.kill()
    for p_ in pids:
        os.kill(p_, signal.SIGKILL)
    time.sleep(0.5)
    t.ok(freezer_state(ONE, "a") == "FROZEN" and os.path.exists(record(ONE)),
         "worker and denvd killed: still frozen")
    del os.environ["DENVD_TEST_FROZEN_SLEEP_MS"]
    cp.drain()
    d.start("run")
    end = time.time() + 20
    while time.time() < end and freezer_state(ONE, "a") != "THAWED":
        time.sleep(0.1)
    t.ok(freezer_state(ONE, "a") == "THAWED" and not os.path.exists(record(ONE)),
         "denvd's start thaws it before any command", d.logtext()[-1500:])
    r = subprocess.run(["docker", "exec", cname(ONE, "a"), "echo", "up"], capture_output=True, text=True, timeout=30)
    t.ok(r.stdout == "up\n", "and it answers docker exec", r)
    t.ok(cp.wait_conn(15), "denvd reconnects")
    res, prog, dt = snapshot(ONE, "ver_after")
    t.ok(res and res["ok"] and status(ONE, "a") == "running" and freezer_state(ONE, "a") == "THAWED",
         "a snapshot after all that works", (res, prog))
    for env in envs:
        res, _, _, _ = cp.command("env.destroy", env, {}, timeout=120)
    left = [e for e in envs if any(docker_leftovers(e.lower()))]
    t.ok(not left, "destroyed; no container or network left", left)
except SystemExit:
    pass
finally:
    d.kill()
    for p_ in worker_pids() if d.proc and d.proc.poll() is None else []:
        os.kill(p_, signal.SIGKILL)
    for e in envs:
        # a container left frozen by a failed run cannot be removed: thaw it first
        for s in ("a", "b"):
            try:
                if freezer_state(e, s) in ("FROZEN", "FREEZING"):
                    thaw(e, s)
            except Exception:
                pass
        remove_project(e.lower())
sys.exit(t.done())
