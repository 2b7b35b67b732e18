"""The quickstart world on real Docker through denvd and the fake control
plane: create (postgres with a volume and a healthcheck, a uid-1000 box with
its home volume, a capped service for the fork bomb), exec, psql, put/get in
chunks, caps, a repeated exec id, destroy."""
import io
import json
import os
import secrets
import stat
import sys
import tarfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, docker, docker_leftovers, remove_project  # noqa: E402

binary, tmp = sys.argv[1], sys.argv[2]
t = TAP()
env = "env_QS" + secrets.token_hex(5).upper()
project = env.lower()
cp = FakeCP()
# The probe here targets a closed port on the container's own loopback: cheap,
# and never leaves the machine. denvd-egress.sh tests the probe for real.
d = Denvd(binary, tmp, cp.url, token=cp.token,
          extra=["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"])

PG = ["psql", "-U", "postgres", "-h", "/run/postgresql", "-v", "ON_ERROR_STOP=1"]
spec = {
    "version": "ver_test", "egress": "deny", "volumes": ["home", "pg"], "warm": [],
    "services": [
        {"name": "bomb", "image": "denv-test/busybox", "command": ["sleep", "3600"], "env": {},
         "ports": [], "volumes": [], "depends_on": [], "user": "",
         "resources": {"memory_mb": 64, "pids": 64, "cpus": 0.5}},
        {"name": "box", "image": "denv-test/busybox", "user": "1000:1000", "command": ["sleep", "3600"],
         "env": {"HOME": "/home/agent"}, "volumes": ["home:/home/agent"], "depends_on": ["db"],
         "ports": ["8080"], "resources": {"memory_mb": 512, "pids": 256, "cpus": 1}},
        {"name": "db", "image": "denv-test/debian", "command": ["postgres"],
         "env": {"POSTGRES_PASSWORD": "pw"}, "volumes": ["pg:/var/lib/postgresql/data"], "ports": ["5432"],
         "health": {"test": ["CMD", "pg_isready", "-U", "postgres", "-h", "/run/postgresql"],
                    "interval": "1s", "retries": 60},
         "depends_on": [], "user": "", "resources": {"memory_mb": 0, "pids": 0, "cpus": 0}},
    ],
}


def ex(svc, cmd, **kw):
    res, _, _, _ = cp.command("env.exec", env, {"service": svc, "cmd": cmd, "timeout_sec": 60}, **kw)
    return res


try:
    d.start()
    t.ok(cp.wait_conn(15), "denvd joins", d.logtext())
    t0 = time.time()
    res, prog, acks, _ = cp.command("env.create", env, spec, timeout=240)
    create_s = time.time() - t0
    t.diag("env.create took %.1f s; progress: %s" % (create_s, " | ".join(prog)))
    if not t.ok(res and res["ok"], "env.create: the quickstart world comes up", (res, d.logtext()[-3000:])):
        raise SystemExit(t.done())
    p = res["payload"]
    t.ok(p.get("egress") == "denied (verified)" and "healthy; egress denied (verified)" in " ".join(prog),
         "egress denied (verified), said in progress", (p, prog))
    t.ok(p.get("egress_probe", {}).get("method") == "netns", "the probe ran from the stack's netns", p)
    t.ok(set(p.get("digests", {})) == {"bomb", "box", "db"} and
         p["digests"]["db"].startswith("denv-test/debian@sha256:"), "digests read back", p.get("digests"))
    eps = p.get("endpoints", {})
    t.ok(set(eps) == {"box", "db"} and all(v.startswith("127.0.0.1:") for v in eps.values()) and
         p.get("ingress") == {"box": {"8080": eps.get("box")}, "db": {"5432": eps.get("db")}} and
         p.get("storage") == "dir" and p.get("started_in"),
         "egress denied: endpoints through the ingress proxy; storage dir; started_in", p)
    envdir = os.path.join(d.data, "envs", env)
    comp = open(os.path.join(envdir, "compose.yaml")).read() if os.path.exists(envdir + "/compose.yaml") else ""
    t.ok(os.path.exists(os.path.join(envdir, "spec.json")) and "internal: true" in comp and
         "pids_limit: 64" in comp and "mem_limit: 4096m" in comp and "cpus: 2.000" in comp,
         "spec.json and compose.yaml written (internal network, caps and defaults)", comp)

    ins = json.loads(docker("inspect", project + "-box-1", project + "-db-1").stdout or "[]")
    box, db = (ins + [{}, {}])[:2]
    hc = box.get("HostConfig", {})
    t.ok(hc.get("Memory") == 512 << 20 and hc.get("PidsLimit") == 256 and hc.get("NanoCpus") == 10 ** 9,
         "box caps: --memory 512m --pids-limit 256 --cpus 1", hc)
    dhc = db.get("HostConfig", {})
    t.ok(dhc.get("Memory") == 4096 << 20 and dhc.get("PidsLimit") == 2048 and dhc.get("NanoCpus") == 2 * 10 ** 9,
         "db caps default to 4096 MiB / 2048 / 2.0", dhc)
    lab = box.get("Config", {}).get("Labels", {})
    t.ok(lab.get("com.docker.compose.project") == project and lab.get("com.docker.compose.service") == "box"
         and box["Config"].get("User") == "1000:1000", "labels and user", box.get("Config"))
    # denvd decides readiness itself (ready.c): create can answer before
    # Docker's own health check has run, so Docker may still say "starting".
    ready = {r.get("service"): r for r in p.get("readiness", [])}
    t.ok(ready.get("db", {}).get("test") in ("postgres", "exec", "docker") and
         db.get("State", {}).get("Health", {}).get("Status") in ("healthy", "starting"),
         "db is ready: denvd's readiness test passed (Docker's health: healthy or starting)",
         (p.get("readiness"), db.get("State", {}).get("Health", {}).get("Status")))
    net = json.loads(docker("network", "inspect", project + "_default").stdout or "[{}]")[0]
    t.ok(net.get("Internal") is True, "the network is internal")

    t0 = time.time()
    r = ex("box", ["id", "-u"])
    exec_ms = (time.time() - t0) * 1000
    t.diag("env.exec round trip %.0f ms" % exec_ms)
    t.ok(r and r["ok"] and r["payload"]["stdout"] == "1000\n" and r["payload"]["exit_code"] == 0,
         "exec as the box prints uid 1000", r)
    r = ex("box", ["sh", "-c", "echo 42 > /home/agent/answer.txt && cat /home/agent/answer.txt && "
                   "stat -c %u /home/agent/answer.txt"])
    t.ok(r and r["ok"] and r["payload"]["stdout"] == "42\n1000\n", "echo 42 > /home/agent/answer.txt works as uid 1000", r)
    hv = os.path.join(envdir, "vol", "home")
    t.ok(os.path.exists(hv + "/answer.txt") and os.stat(hv).st_uid == 1000,
         "the home volume is a host dir owned by uid 1000")
    r = ex("box", ["sh", "-c", "echo oops >&2; exit 3"])
    t.ok(r and r["ok"] and r["payload"]["exit_code"] == 3 and r["payload"]["stderr"] == "oops\n",
         "a non-zero exit is ok:true with its code and stderr", r)
    r = ex("box", ["sh", "-c", "echo out; echo err >&2; echo out2"])
    t.ok(r and r["ok"] and r["payload"]["stdout"] == "out\nout2\n" and r["payload"]["stderr"] == "err\n",
         "stdout and stderr come back apart", r)
    r = ex("box", ["sh", "-c", "head -c 1200000 /dev/zero | tr '\\0' a; echo done >&2"])
    t.ok(r and r["ok"] and len(r["payload"]["stdout"]) == 1 << 20 and r["payload"].get("truncated") is True and
         r["payload"]["stderr"] == "done\n", "output over 1 MiB is cut at 1 MiB and marked truncated",
         r and {k: (len(v) if isinstance(v, str) else v) for k, v in r["payload"].items()})
    res, _, _, _ = cp.command("env.exec", env, {"service": "box", "timeout_sec": 1,
                                                "cmd": ["sh", "-c", "echo $$ > /tmp/exec-pid; exec sleep 60"]})
    t.ok(res and not res["ok"] and "timed out after 1 s" in res.get("error", ""), "an exec over its timeout fails", res)
    r = ex("box", ["sh", "-c", "kill -0 $(cat /tmp/exec-pid) 2>/dev/null && echo running || echo gone"])
    t.ok(r and r["ok"] and r["payload"]["stdout"] == "gone\n", "and its process does not keep running", r)

    r = ex("db", PG + ["-c", "CREATE TABLE t (x int); INSERT INTO t VALUES (42);"])
    t.ok(r and r["ok"] and r["payload"]["exit_code"] == 0, "psql writes a row", r)
    r = ex("db", PG + ["-tAc", "SELECT x FROM t"])
    t.ok(r and r["ok"] and r["payload"]["stdout"].strip() == "42", "psql reads the row back", r)
    pv = os.path.join(envdir, "vol", "pg")
    t.ok(os.path.exists(pv + "/PG_VERSION"), "postgres data lives in the volume dir on the host")

    # One command at a time per environment, but execs side by side (a client
    # kills a command it cancelled with a second exec).
    def order_of(cmds):
        for c, kind, payload in cmds:
            cp.send({"type": "command", "command_id": c, "kind": kind, "env_id": env, "payload": payload})
        ids = [c for c, _, _ in cmds]
        order = []
        end = time.time() + 30
        while len(order) < len(ids) and time.time() < end:
            f = cp.next(lambda x: x.get("type") == "result" and x.get("command_id") in ids, end - time.time())
            if f:
                order.append(f["command_id"])
        return order

    ca, cb = "cmd_sa" + secrets.token_hex(4), "cmd_sb" + secrets.token_hex(4)
    order = order_of([(ca, "env.exec", {"service": "box", "cmd": ["sh", "-c", "sleep 1.5; echo a"]}),
                      (cb, "env.exec", {"service": "box", "cmd": ["echo", "b"]})])
    t.ok(order == [cb, ca], "a second exec on one environment runs beside the first", order)
    ca, cp_ = "cmd_sa" + secrets.token_hex(4), "cmd_sp" + secrets.token_hex(4)
    order = order_of([(ca, "env.exec", {"service": "box", "cmd": ["sh", "-c", "sleep 1.5; echo a"]}),
                      (cp_, "env.put", {"service": "box", "path": "/tmp/x", "tar_bytes": 5000,
                                        "tar_sha256": "0" * 64, "tar_chunks": 1})])
    t.ok(order == [ca, cp_], "any other command waits for the exec running on its environment", order)

    # A repeated exec id: answered from the log, the side effect happens once.
    cid = "cmd_once" + secrets.token_hex(4)
    for _ in range(2):
        r = ex("box", ["sh", "-c", "echo x >> /home/agent/count; wc -l < /home/agent/count"], cid=cid)
    r2 = ex("box", ["cat", "/home/agent/count"])
    t.ok(r and r["payload"]["stdout"].strip() == "1" and r2["payload"]["stdout"] == "x\n",
         "a repeated exec id runs once", (r, r2))

    # put/get round trip of a tree with a file over 1 MiB (chunked both ways).
    big = os.urandom(1536 * 1024 + 7)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        def add(name, data=None, dir=False, mode=0o644):
            ti = tarfile.TarInfo(name)
            ti.mode, ti.mtime = (0o755 if dir else mode), 1700000000
            if dir:
                ti.type = tarfile.DIRTYPE
                tf.addfile(ti)
            else:
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
        add("tree", dir=True)
        add("tree/a", dir=True)
        add("tree/a/b", dir=True)
        add("tree/a/b/c.txt", b"hello\n")
        add("tree/big.bin", big)
        add("tree/empty", dir=True)
        add("tree/run.sh", b"#!/bin/sh\necho hi\n", mode=0o755)
    tb = buf.getvalue()
    t0 = time.time()
    res, _, _, _ = cp.put(env, "box", "/home/agent/up", tb)
    t.ok(res and res["ok"] and res["payload"]["path"] == "/home/agent/up", "put of a %d-byte archive in %d chunks"
         % (len(tb), (len(tb) + (1 << 20) - 1) >> 20), res)
    r = ex("box", ["sh", "-c", "cat /home/agent/up/tree/a/b/c.txt; wc -c < /home/agent/up/tree/big.bin"])
    t.ok(r and r["payload"]["stdout"] == "hello\n%d\n" % len(big), "the tree is there inside the box", r)
    gcid = "cmd_get" + secrets.token_hex(4)
    data, gres, why = cp.get(env, "box", "/home/agent/up", cid=gcid)
    t.diag("put+get %.1f s" % (time.time() - t0))
    got = {}
    if data:
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            for m in tf.getmembers():
                got[m.name] = (m.type, tf.extractfile(m).read() if m.isfile() else None, m.mode & 0o777)
    t.ok(data is not None and gres["payload"]["tar_chunks"] >= 2, "get streams the archive in chunks", why)
    t.ok(got.get("up/tree/a/b/c.txt", (0, 0))[1] == b"hello\n" and got.get("up/tree/big.bin", (0, 0))[1] == big
         and got.get("up/tree/empty", ("x",))[0] == tarfile.DIRTYPE and
         got.get("up/tree/run.sh", (0, 0, 0))[2] == 0o755, "get returns the same tree", sorted(got))
    data2, _, why2 = cp.get(env, "box", "/home/agent/up", cid=gcid)
    t.ok(data2 == data, "a repeated get id sends its chunks again, then the stored result", why2)

    # sha256 mismatch: announce another digest than what was sent
    import base64, hashlib  # noqa: E401
    bad = "cmd_bad" + secrets.token_hex(4)
    cp.send({"type": "chunk", "command_id": bad, "seq": 0, "last": True, "data": base64.b64encode(b"abc").decode()})
    res, _, _, _ = cp.command("env.put", env, {"service": "box", "path": "/tmp/x", "tar_bytes": 3,
                                              "tar_sha256": hashlib.sha256(b"abd").hexdigest(), "tar_chunks": 1},
                              cid=bad)
    t.ok(res and res["ok"] is False and res["error"] == "env.put: archive incomplete: sha256 mismatch",
         "put with a wrong sha256 fails", res)
    res, _, _, _ = cp.command("env.put", env, {"service": "box", "path": "/tmp/x", "tar_bytes": 5000,
                                              "tar_sha256": "0" * 64, "tar_chunks": 1})
    t.ok(res and res["ok"] is False and res["error"] == "env.put: archive incomplete: got 0 of 5000 bytes",
         "put whose chunks never came fails with what arrived", res)

    # Caps: a fork bomb hits the pid cap; the sidecar and the other services carry on.
    r = ex("bomb", ["sh", "-c", "b() { b | b & }; b; sleep 2; echo launched"])
    time.sleep(2)
    pids = docker("stats", "--no-stream", "--format", "{{.PIDs}}", project + "-bomb-1").stdout.strip()
    t.diag("fork bomb: exec result %s; pids in the container now %s" % (r and r.get("ok"), pids))
    cid_full = docker("inspect", "--format", "{{.Id}}", project + "-bomb-1").stdout.strip()
    ev = ""
    for base in ("/sys/fs/cgroup/pids/docker/", "/sys/fs/cgroup/system.slice/docker-"):
        for f in (base + cid_full + "/pids.events", base + cid_full + ".scope/pids.events"):
            if os.path.exists(f):
                ev = open(f).read()
    hit = [int(x.split()[1]) for x in ev.splitlines() if x.startswith("max ")]
    t.diag("pids.events: %r" % ev)
    t.ok(pids.isdigit() and 48 <= int(pids) <= 64 and (not ev or (hit and hit[0] > 0)),
         "the fork bomb is held at pids_limit 64 (pids %s; forks refused by the cap: %s)"
         % (pids, hit[0] if hit else "n/a"))
    res, _, _, _ = cp.command("host.report", timeout=30)
    t.ok(res and res["ok"] and d.proc.poll() is None, "denvd stays up and answers")
    r = ex("box", ["id", "-u"])
    t.ok(r and r["ok"] and r["payload"]["stdout"] == "1000\n", "the other services still answer")

    # A container killed under a running command: under runc dockerd ends the
    # exec's stream, and the command's answer is the kill (137), not a timeout.
    # (A gVisor sandbox that ends leaves the stream open: test_gvisor.py.)
    killer = threading.Timer(1.5, lambda: docker("kill", project + "-bomb-1"))
    killer.start()
    r = ex("bomb", ["sleep", "50"])
    killer.join()
    t.ok(r and r["ok"] and r["payload"].get("exit_code") == 137,
         "an exec whose container is killed under it answers with the kill (137)", r)

    res, prog, _, _ = cp.command("env.destroy", env, {}, timeout=120)
    t.ok(res and res["ok"] and res["payload"] == {"destroyed": env}, "env.destroy", res)
    c, n = docker_leftovers(project)
    t.ok(not c and not n, "no container or network left", (c, n))
    t.ok(not os.path.exists(envdir), "the environment's data dir is gone")

    # Services without dependencies start at once; one that cannot start
    # fails the create with its name, and nothing of the stack is left.
    bad_env = env + "BAD"
    bad_project = bad_env.lower()
    svc = {"image": "denv-test/busybox:latest", "command": ["sleep", "3600"], "env": {}, "volumes": [],
           "ports": [], "depends_on": [], "user": "", "resources": {"memory_mb": 0, "pids": 0, "cpus": 0}}
    bad = {"egress": "deny", "volumes": [], "services": [dict(svc, name="good"),
                                                        dict(svc, name="broken", image="denv-test/none:missing")]}
    res, _, _, _ = cp.command("env.create", bad_env, bad, timeout=120)
    t.ok(res and not res["ok"] and 'service "broken"' in res.get("error", ""),
         "a service that cannot start fails the create, named", res)
    c, n = docker_leftovers(bad_project)
    t.ok(not c and not n, "and the stack is stopped: no container or network left", (c, n))
    cp.command("env.destroy", bad_env, {}, timeout=120)

    # A fresh volume the image has nothing for belongs to the service's user,
    # resolved by name the way Docker does: from the IMAGE's /etc/passwd and
    # /etc/group (this host has no user 1234 nor group 50 named so).
    users_tag = "denv-test/users:" + secrets.token_hex(6)
    ctx = os.path.join(tmp, "users-image")
    os.makedirs(ctx)
    open(os.path.join(ctx, "passwd"), "w").write("root:x:0:0:root:/root:/bin/sh\n"
                                                 "agent:x:1234:1234::/home/agent:/bin/sh\n")
    open(os.path.join(ctx, "group"), "w").write("root:x:0:\nstaff:x:50:agent\nagent:x:1234:\n")
    open(os.path.join(ctx, "Dockerfile"), "w").write("FROM denv-test/busybox\nCOPY passwd group /etc/\n")
    built = docker("build", "-q", "-t", users_tag, ctx)
    if t.ok(built.returncode == 0, "fixture image with user agent (1234) and group staff (50)", built.stderr):
        users_env = env + "USR"
        usvc = {"image": users_tag, "command": ["sleep", "3600"], "env": {}, "ports": [], "depends_on": [],
                "resources": {"memory_mb": 0, "pids": 0, "cpus": 0}}
        uspec = {"egress": "deny", "volumes": ["ha", "hb", "hc", "hd"], "services": [
            dict(usvc, name="a", user="agent", volumes=["ha:/home/agent"]),
            dict(usvc, name="b", user="agent:staff", volumes=["hb:/work"]),
            dict(usvc, name="c", user="1234", volumes=["hc:/work"]),
            dict(usvc, name="d", image="denv-test/busybox", user="4321", volumes=["hd:/work"])]}
        t0 = time.time()
        res, prog, _, _ = cp.command("env.create", users_env, uspec, timeout=240)
        t.diag("env.create with named users took %.2f s" % (time.time() - t0))
        if t.ok(res and res["ok"], "env.create with user: agent, agent:staff, 1234", (res, d.logtext()[-2000:])):
            vd = os.path.join(d.data, "envs", users_env, "vol")

            def owner(v):
                st = os.stat(os.path.join(vd, v))
                return st.st_uid, st.st_gid
            t.ok(owner("ha") == (1234, 1234), "user: agent -> the volume is owned by 1234:1234 (passwd)",
                 owner("ha"))
            t.ok(owner("hb") == (1234, 50), "user: agent:staff -> 1234:50 (group from the image)", owner("hb"))
            t.ok(owner("hc") == (1234, 1234), "user: 1234 -> its passwd entry's group, as Docker does",
                 owner("hc"))
            t.ok(owner("hd") == (4321, 0), "user: 4321 in an image with no passwd -> group 0", owner("hd"))
            r, _, _, _ = cp.command("env.exec", users_env, {"service": "a", "timeout_sec": 60, "cmd": [
                "sh", "-c", "id -u; id -g; echo hi > /home/agent/f && cat /home/agent/f"]})
            t.ok(r and r["ok"] and r["payload"]["stdout"] == "1234\n1234\nhi\n",
                 "the agent writes its own home", r)
        cp.command("env.destroy", users_env, {}, timeout=120)
        # The image's files are now cached by image id: a second env from
        # the same image resolves its user without a container.
        t0 = time.time()
        res, _, _, _ = cp.command("env.create", users_env + "2", {"egress": "deny", "volumes": ["ha"], "services": [
            dict(usvc, name="a", user="agent:staff", volumes=["ha:/home/agent"])]}, timeout=240)
        t.diag("again, from the cache: %.2f s" % (time.time() - t0))
        st = os.stat(os.path.join(d.data, "envs", users_env + "2", "vol", "ha")) if res and res["ok"] else None
        t.ok(st and (st.st_uid, st.st_gid) == (1234, 50), "the same from the fill cache", res)
        cp.command("env.destroy", users_env + "2", {}, timeout=120)
        res, _, _, _ = cp.command("env.create", users_env + "3", {"egress": "deny", "volumes": ["ha"], "services": [
            dict(usvc, name="lost", user="nobodyhere", volumes=["ha:/home/agent"])]}, timeout=240)
        err = (res or {}).get("error", "")
        t.ok(res and not res["ok"] and 'service "lost"' in err and '"nobodyhere"' in err and users_tag in err,
             "user: nobodyhere -> the create fails naming the service, the user and the image", res)
        cp.command("env.destroy", users_env + "3", {}, timeout=120)
        for suffix in ("", "2", "3"):
            remove_project((users_env + suffix).lower())
        docker("rmi", "-f", users_tag)
    t.ok(d.proc.poll() is None, "denvd still running")
finally:
    d.kill()
    remove_project(project)
    remove_project(env.lower() + "bad")
    for suffix in ("usr", "usr2", "usr3"):
        remove_project(env.lower() + suffix)
sys.exit(t.done())
