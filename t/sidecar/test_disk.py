"""Disk caps on the dir backend, on real Docker through denvd and the fake
control plane. denvd runs with --disk-limit 48m. Env A declares a 32 MiB
cap (disk_mb), env B declares none and gets the host's 48 MiB. An agent in
A fills its disk: the write stops at A's cap with ENOSPC, B still writes,
the data dir keeps its room; a verify.collect of A after the fill gives its
answer (or a refusal with the reason), never an error. Destroy unmounts and
removes the image."""
import json
import os
import secrets
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, docker_leftovers, remove_project  # noqa: E402

binary, tmp = sys.argv[1], sys.argv[2]
t = TAP()
tag = secrets.token_hex(4).upper()
A, B = "env_DKA" + tag, "env_DKB" + tag
cp = FakeCP()
d = Denvd(binary, tmp, cp.url, token=cp.token,
          extra=["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/", "--disk-limit", "48m"])
H = "/home/agent"


def spec(disk_mb):
    s = {"version": "ver_dk", "egress": "deny", "volumes": ["home"], "warm": [],
         "services": [{"name": "box", "image": "denv-test/busybox", "user": "1000:1000", "command": ["sleep", "3600"],
                       "env": {"HOME": H}, "volumes": ["home:" + H], "depends_on": [], "ports": [],
                       "resources": {"memory_mb": 128, "pids": 64, "cpus": 1}}]}
    if disk_mb:
        s["disk_mb"] = disk_mb
    return s


def ex(env, script, timeout=120):
    res, _, _, _ = cp.command("env.exec", env, {"service": "box", "cmd": ["sh", "-c", script],
                                                "timeout_sec": timeout}, timeout=timeout + 30)
    return res["payload"] if res and res.get("ok") else {"error": res}


def free_mb(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize >> 20


try:
    d.start()
    t.ok(cp.wait_conn(15), "denvd joins", d.logtext())
    res, prog, _, _ = cp.command("env.create", A, spec(32), timeout=240)
    if not t.ok(res and res["ok"], "env A (x-denv.disk 32m) comes up", (res, d.logtext()[-2000:])):
        raise SystemExit(t.done())
    ev = res["payload"].get("disk", {})
    t.ok(ev.get("limit_mb") == 32 and ev.get("enforced") is True and ev.get("mechanism") == "ext4 image (loop)"
         and isinstance(ev.get("used_mb"), int), "the evidence records the cap, enforced, and its use", ev)
    t.ok(any("disk cap 32 MiB" in p for p in prog), "progress says so", prog)
    va = os.path.join(d.data, "envs", A, "vol")
    t.ok(os.path.ismount(va) and os.path.exists(os.path.join(d.data, "envs", A, "disk.img")),
         "A's volumes are a mount of its own image", va)
    res, _, _, _ = cp.command("env.create", B, spec(0), timeout=240)
    t.ok(res and res["ok"] and res["payload"].get("disk", {}).get("limit_mb") == 48,
         "env B without x-denv.disk gets the host's --disk-limit (48 MiB)", res and res.get("payload"))
    before = free_mb(d.data)
    r = ex(A, "echo 42 > ~/answer.txt; dd if=/dev/zero of=$HOME/fill bs=1M 2>&1; "
              "ls -l ~/fill | awk '{print $5}'")
    out = r.get("stdout", "")
    size = int(out.strip().split("\n")[-1]) if out.strip().split("\n")[-1].isdigit() else -1
    t.ok("No space left on device" in out and 0 < size <= 32 << 20,
         "the disk-fill attack stops at A's cap with ENOSPC (%d bytes)" % size, r)
    t.ok(before - free_mb(d.data) < 40, "the data dir lost at most the cap (%d MiB before, %d after)"
         % (before, free_mb(d.data)))
    res, _, _, _ = cp.command("env.metrics", A, {}, timeout=60)
    dk = ((res or {}).get("payload") or {}).get("disk") or {}
    t.ok(res and res["ok"] and dk.get("limit_mb") == 32 and 16 << 20 < dk.get("used_bytes", 0) <= 33 << 20,
         "env.metrics reports A's disk: the cap and what its volumes use", res)
    r = ex(B, "dd if=/dev/zero of=$HOME/f bs=1M count=8 2>&1 | tail -1; ls -l $HOME/f | awk '{print $5}'")
    t.ok(r.get("stdout", "").endswith("8388608\n") and "No space" not in r.get("stdout", ""),
         "B still writes while A is full", r)
    r = ex(B, "dd if=/dev/zero of=$HOME/g bs=1M count=64 2>&1")
    t.ok("No space left on device" in r.get("stdout", ""), "and B stops at its own 48 MiB", r)
    res, _, _, _ = cp.command("verify.collect", A, {"id": "vrf_dk" + tag.lower(), "agent_service": "box",
                                                     "collect": [H + "/answer.txt"]}, timeout=120)
    p = (res or {}).get("payload") or {}
    t.ok(res and res["ok"] and (p.get("files") == 1 or p.get("refused")),
         "verify.collect after the fill: the answer or a refusal with its reason, not an error", res)
    res, _, _, _ = cp.command("env.destroy", A, {}, timeout=120)
    t.ok(res and res["ok"] and not os.path.ismount(va) and not os.path.exists(os.path.join(d.data, "envs", A)),
         "env.destroy unmounts and removes A's image", res)
    cp.command("env.destroy", B, {}, timeout=120)
finally:
    d.kill()
    for env in (A, B):
        remove_project(env.lower())
        v = os.path.join(d.data, "envs", env, "vol")
        if os.path.ismount(v):
            os.system("umount " + v)
sys.exit(t.done())
