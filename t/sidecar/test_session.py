"""denvd's session and command log against the fake control plane:
join, identity saved 0600, reconnect with the secret, heartbeat, backoff,
host.report, later kinds, a repeated command id, 1008 is fatal, install."""
import json
import os
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP  # noqa: E402

binary, tmp = sys.argv[1], sys.argv[2]
t = TAP()
cp = FakeCP(token="djt_" + "a" * 20)
d = Denvd(binary, tmp, cp.url, token="djt_" + "a" * 20)
try:
    d.start("join")
    t.ok(cp.wait_conn(15), "join: denvd connects and is admitted", d.logtext())
    h = cp.hellos[0] if cp.hellos else {}
    p = h.get("payload", {})
    t.ok(h.get("type") == "hello" and p.get("host_id") == "" and p.get("token") == "djt_" + "a" * 20,
         "first hello presents the join token with an empty host_id", h)
    caps = p.get("capabilities", {})
    want = ["hostname", "os", "arch", "cpus", "memory_mb", "disk_gb", "storage", "docker", "compose",
            "netns", "denvd_version"]
    t.ok(all(k in caps for k in want) and caps["os"] == "linux" and caps["storage"] == "dir"
         and caps["cpus"] >= 1 and caps["memory_mb"] > 0, "hello carries the capabilities", caps)
    t.ok(caps.get("docker", "") != "", "capabilities name the Docker server version", caps)
    vfile = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "VERSION")
    t.ok(caps.get("denvd_version") == open(vfile).read().strip(), "denvd reports the VERSION file's version", caps)
    time.sleep(0.5)
    st = json.load(open(d.state)) if os.path.exists(d.state) else {}
    hid, sec = list(cp.hosts.items())[0] if cp.hosts else ("", "")
    t.ok(st.get("host_id") == hid and st.get("secret") == sec and st.get("server") == cp.url,
         "host_id and secret saved to the state file", st)
    mode = stat.S_IMODE(os.stat(d.state).st_mode) if os.path.exists(d.state) else 0
    t.ok(mode == 0o600, "state file is 0600 (got %o)" % mode)

    t0 = time.time()
    res, prog, acks, _ = cp.command("host.report", timeout=30)
    t.ok(res and res["ok"] and "capabilities" in res["payload"] and acks == 1,
         "host.report: acked, answered with capabilities", res)
    # Every kind answers a malformed command with a failed result that names
    # the kind and what is missing, never silence (the real work is tested in
    # denvd-snap*.sh and denvd-verify*.sh).
    for kind in ["env.snapshot", "env.fork", "env.rollback", "verify.collect", "verify.run"]:
        res, _, _, _ = cp.command(kind, env="env_later", timeout=30)
        t.ok(res and res["ok"] is False and res["error"].startswith(kind + ": ")
             and "not implemented" not in res["error"],
             "%s with an empty payload is refused with a reason" % kind, res)
    res, _, _, _ = cp.command("egress.set", env="env_later", timeout=30)
    t.ok(res and res["ok"] is False and res["error"] == "unknown command kind egress.set",
         "an unknown kind is answered with unknown command kind", res)

    # A repeated id is answered from the log without running again.
    res1, _, _, _ = cp.command("host.report", cid="cmd_repeat1", timeout=30)
    logf = os.path.join(d.data, "commands", "cmd_repeat1.json")
    t.ok(os.path.exists(logf) and json.load(open(logf))["ok"], "result written to commands/<id>.json")
    mtime = os.stat(logf).st_mtime_ns
    res2, _, acks, _ = cp.command("host.report", cid="cmd_repeat1", timeout=30)
    t.ok(res2 and res2.get("payload") == res1.get("payload") and os.stat(logf).st_mtime_ns == mtime,
         "repeated command id answered from the log, not run again", d.logtext()[-2000:])

    hb = cp.next(lambda f: f.get("type") == "heartbeat", max(0.5, 12 - (time.time() - t0)))
    t.ok(hb is not None and hb.get("host_id") == hid, "heartbeat within 10 s, with the host id", hb)

    # The control plane drops the stream: denvd comes back with its secret.
    n = len(cp.hellos)
    cp.conn.close(1001, "going away")
    t1 = time.time()
    end = time.time() + 10
    while len(cp.hellos) == n and time.time() < end:
        time.sleep(0.05)
    took = time.time() - t1
    h2 = cp.hellos[-1]
    t.ok(len(cp.hellos) > n and h2["payload"]["host_id"] == hid and h2["payload"]["token"] == sec,
         "reconnects with host_id and secret", h2)
    t.ok(0.5 <= took <= 3.5, "first reconnect after about 1 s (took %.1f s)" % took)
    t.ok(sec not in d.logtext() and "djt_" + "a" * 20 not in d.logtext(), "neither secret nor token is logged")
    d.kill()

    # run: uses the saved identity, no token needed.
    d.token = None
    d.start("run")
    t.ok(cp.wait_conn(15) and cp.hellos[-1]["payload"]["token"] == sec, "run reconnects with the saved secret")

    # A refusal (1008) is fatal.
    cp.refuse_all = True
    cp.conn.close(1001, "bye")
    try:
        rc = d.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        rc = None
    t.ok(rc not in (None, 0) and "1008" in d.logtext(), "a 1008 close makes denvd exit (rc %s)" % rc,
         d.logtext()[-1500:])
finally:
    d.kill()

# run without a saved identity refuses.
r = subprocess.run([binary, "run", "--server", cp.url, "--state", os.path.join(tmp, "none.json"),
                    "--data", os.path.join(tmp, "d2")], capture_output=True, text=True, timeout=20)
t.ok(r.returncode != 0 and "no saved identity" in r.stderr, "run refuses without a saved identity", r.stderr)

# --env-file fills flags; flags and saved state take precedence as documented.
envf = os.path.join(tmp, "join.env")
open(envf, "w").write("DENV_SERVER=http://127.0.0.1:9\nDENV_JOIN_TOKEN=djt_fromfile\n")
root = os.path.join(tmp, "root")
r = subprocess.run([binary, "install", "--env-file", envf, "--data", "/srv/denv", "--root", root],
                   capture_output=True, text=True, timeout=30)
envp = os.path.join(root, "etc/denv/denvd.env")
unit = os.path.join(root, "etc/systemd/system/denvd.service")
ok = r.returncode == 0 and os.path.exists(envp) and os.path.exists(unit)
t.ok(ok, "install --root writes the env file and the unit", r.stderr)
if ok:
    txt = open(envp).read()
    t.ok("DENV_SERVER=http://127.0.0.1:9\n" in txt and "DENV_JOIN_TOKEN=djt_fromfile\n" in txt
         and "DENV_DATA_DIR=/srv/denv\n" in txt and "DENV_ZFS_POOL=\n" in txt,
         "denvd.env has server, token, data dir, zfs pool", txt)
    t.ok(stat.S_IMODE(os.stat(envp).st_mode) == 0o600, "denvd.env is 0600")
    u = open(unit).read()
    t.ok("EnvironmentFile=/etc/denv/denvd.env" in u and
         "ExecStart=/usr/local/bin/denvd join --state /etc/denv/host.json" in u and
         "Restart=always" in u and "LimitNOFILE=1048576" in u and "WantedBy=multi-user.target" in u,
         "unit file as documented", u)
    b = os.path.join(root, "usr/local/bin/denvd")
    t.ok(os.access(b, os.X_OK) and open(b, "rb").read() == open(binary, "rb").read(),
         "binary copied to usr/local/bin/denvd")
# Every join/run flag reaches the installed service: --btrfs-root and the
# probe settings as denvd.env lines, --state and -v on the ExecStart line.
root3 = os.path.join(tmp, "root3")
r = subprocess.run([binary, "install", "--server", "http://127.0.0.1:9", "--token", "djt_x", "--root", root3,
                    "--btrfs-root", "/srv/btrfs", "--probe-image", "denv-test/busybox",
                    "--probe-url", "http://127.0.0.1:9/", "--probe-mode", "container",
                    "--state", "/var/lib/denv-state/host.json", "-v"],
                   capture_output=True, text=True, timeout=30, env=dict(os.environ, DENV_SUBNET_POOL="10.99.0.0/16"))
envp3 = os.path.join(root3, "etc/denv/denvd.env")
txt = open(envp3).read() if os.path.exists(envp3) else ""
t.ok(r.returncode == 0 and "DENV_BTRFS_ROOT=/srv/btrfs\n" in txt and "DENV_PROBE_IMAGE=denv-test/busybox\n" in txt
     and "DENV_PROBE_URL=http://127.0.0.1:9/\n" in txt and "DENV_PROBE_MODE=container\n" in txt
     and "DENV_SUBNET_POOL=10.99.0.0/16\n" in txt, "install saves --btrfs-root, the probe flags and the subnet pool",
     (r.stderr, txt))
unit3 = os.path.join(root3, "etc/systemd/system/denvd.service")
u = open(unit3).read() if os.path.exists(unit3) else ""
t.ok("ExecStart=/usr/local/bin/denvd join --state /var/lib/denv-state/host.json -v\n" in u,
     "install puts --state and -v on the unit's ExecStart", u)
if ok:
    t.ok("DENV_BTRFS_ROOT=\n" in open(envp).read() and "DENV_PROBE" not in open(envp).read(),
         "without them: an empty DENV_BTRFS_ROOT, and the probe defaults left to denvd", open(envp).read())
for bad, why in ((["--btrfs-root", "rel/dir"], "--btrfs-root must be an absolute path"),
                 (["--probe-mode", "sometimes"], "--probe-mode sometimes"),
                 (["--state", "/etc/denv/my host.json"], "--state")):
    r = subprocess.run([binary, "install", "--server", "http://x", "--root", os.path.join(tmp, "root4")] + bad,
                       capture_output=True, text=True, timeout=30)
    t.ok(r.returncode != 0 and why in r.stderr and not os.path.exists(os.path.join(tmp, "root4")),
         "install refuses %s" % " ".join(bad), r.stderr)
r = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", binary, "install",
                    "--server", "http://x", "--root", os.path.join(tmp, "root2")],
                   capture_output=True, text=True, timeout=30)
t.ok(r.returncode != 0 and "root" in r.stderr and not os.path.exists(os.path.join(tmp, "root2")),
     "install refuses without root", r.stderr)
sys.exit(t.done())
