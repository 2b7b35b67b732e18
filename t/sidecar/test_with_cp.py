"""denvd with the real control plane (bin/denv-cp, [F5]): a host joins with a
join token from the API, the quickstart world deploys through prepare, start
and health, exec prints uid 1000, a psql row is read back, files round-trip
through PUT/GET /v1/envs/{env}/files (chunked both ways), and a destroy
leaves nothing behind; an egress-denied sandbox with a port serves through
denvd's ingress proxy and its deployment's ingress phase says so. Other
phases after health (snapshot...) are not judged here."""
import io
import json
import os
import sys
import tarfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import TAP, docker_leftovers, remove_project  # noqa: E402
from realcp import QUICKSTART as COMPOSE, RealCP  # noqa: E402

top, tmp = sys.argv[1], sys.argv[2]
t = TAP()
rcp = RealCP(top, tmp, 18500)
cp, srv, key = rcp.proc, rcp.srv, rcp.key


def req(method, path, body=None, raw=None, ctype="application/json"):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    r = urllib.request.Request(srv + path, data=data, method=method,
                               headers={"Authorization": "Bearer " + key, "Content-Type": ctype})
    try:
        with urllib.request.urlopen(r, timeout=120) as resp:
            b = resp.read()
            if resp.headers.get("Content-Type", "").startswith("application/json"):
                return resp.status, json.loads(b)
            return resp.status, b
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def wait_dep(depid, limit=180):
    return rcp.wait_dep(depid, limit, req)


d = None
env = None
try:
    rcp.wait_up()
    st, tok = req("POST", "/v1/join-tokens", {})
    t.ok(st == 201 and tok["token"].startswith("djt_"), "join token from the API", tok)
    d = rcp.start_denvd(tok["token"])
    hosts = rcp.wait_connected(req)
    t.ok(hosts and hosts[0].get("connected") and hosts[0].get("Capabilities", {}).get("storage") == "dir",
         "the host joins and reports its capabilities", hosts)
    req("POST", "/v1/projects", {"name": "qs"})
    t0 = time.time()
    st, dep = req("POST", "/v1/projects/qs/deploy", {"compose": COMPOSE})
    t.ok(st == 202, "deploy accepted", dep)
    dd = wait_dep(dep["deployment"]["ID"])
    env = dd["deployment"]["EnvID"]
    phases = {p["Name"]: p for p in dd["phases"]}
    t.diag("deploy to health: %.1f s; phases: %s" % (time.time() - t0,
           ", ".join("%s=%s" % (p["Name"], p["Status"]) for p in dd["phases"])))
    ev = (phases.get("prepare") or {}).get("Evidence") or {}
    t.ok(all((phases.get(n) or {}).get("Status") == "ok" for n in ("prepare", "start", "health")),
         "prepare, start and health phases pass", dd)
    t.ok(ev.get("egress") == "denied (verified)" and set(ev.get("digests", {})) == {"box", "db"},
         "prepare evidence: egress denied (verified), digests", ev)
    st, r = req("POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": ["id", "-u"]})
    t.ok(st == 200 and r["stdout"] == "1000\n" and "truncated" not in r, "exec as the box prints uid 1000", r)
    st, r = req("POST", "/v1/envs/%s/exec" % env,
                {"service": "box", "cmd": ["sh", "-c", "head -c 1100000 /dev/zero | tr '\\0' x"]})
    t.ok(st == 200 and len(r["stdout"]) == 1 << 20 and r.get("truncated") is True,
         "output over the host's 1 MiB cap comes back cut and says truncated",
         st == 200 and {k: (len(v) if isinstance(v, str) else v) for k, v in r.items()})
    st, r = req("POST", "/v1/envs/%s/exec" % env,
                {"service": "box", "cmd": ["sh", "-c", "echo 42 > /home/agent/answer.txt && cat /home/agent/answer.txt"]})
    t.ok(st == 200 and r["stdout"] == "42\n", "the agent writes its home", r)
    pg = ["psql", "-U", "postgres", "-h", "/run/postgresql", "-v", "ON_ERROR_STOP=1"]
    req("POST", "/v1/envs/%s/exec" % env, {"service": "db", "cmd": pg + ["-c", "CREATE TABLE t (x int); INSERT INTO t VALUES (7)"]})
    st, r = req("POST", "/v1/envs/%s/exec" % env, {"service": "db", "cmd": pg + ["-tAc", "SELECT x FROM t"]})
    t.ok(st == 200 and r["stdout"] == "7\n", "a psql row is read back", r)
    big = os.urandom((3 << 20) + 5)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in (("d/big.bin", big), ("d/e/small.txt", b"hi\n")):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    st, r = req("PUT", "/v1/envs/%s/files?service=box&path=/home/agent/up" % env, raw=buf.getvalue(),
                ctype="application/x-tar")
    t.ok(st == 200, "PUT files (3 MiB, chunked)", r)
    st, r = req("GET", "/v1/envs/%s/files?service=box&path=/home/agent/up" % env)
    same = False
    if st == 200:
        with tarfile.open(fileobj=io.BytesIO(r)) as tf:
            same = tf.extractfile("up/d/big.bin").read() == big and tf.extractfile("up/d/e/small.txt").read() == b"hi\n"
    t.ok(same, "GET files returns the same tree", (st, r if st != 200 else ""))
    st, r = req("DELETE", "/v1/envs/%s" % env)
    dd = wait_dep(r["deployment"]["ID"]) if st == 202 else {}
    c, n = docker_leftovers(env.lower())
    t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and not c and not n and
         not os.path.exists(os.path.join(tmp, "data", "envs", env)), "destroy leaves nothing behind", (dd, c, n))

    # An egress-denied sandbox (the default) with a port: served through denvd's ingress proxy.
    st, sb = req("POST", "/v1/sandboxes", {"image": "denv-test/debian", "ports": ["8000"],
                                           "cmd": ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1",
                                                   "--directory", "/etc"]})
    ok = st == 201
    env = sb["environment"]["ID"] if ok else None
    ep = sb["environment"].get("Endpoints", {}).get("main", "") if ok else ""
    t.ok(ok and ep.startswith("127.0.0.1:"), "POST /v1/sandboxes with ports and default egress: 201 with an endpoint",
         (st, sb))
    body = b""
    for _ in range(50):
        try:
            with urllib.request.urlopen("http://%s/os-release" % ep, timeout=10) as resp:
                body = resp.read()
            break
        except (OSError, ValueError):
            time.sleep(0.3)
    t.ok(b"Debian" in body, "the sandbox's endpoint serves from inside the container", body[:200])
    dd = wait_dep(sb["deployment"]["ID"]) if ok else {}
    ph = {p["Name"]: p for p in dd.get("phases", [])}
    ing = ph.get("ingress") or {}
    t.ok(ing.get("Status") == "ok" and ing.get("Evidence") == {"endpoints": {"main": ep}, "proxy": "denvd"},
         "the deployment's ingress phase is ok, proxy denvd", ing)
    t.ok((ph.get("prepare") or {}).get("Evidence", {}).get("egress") == "denied (verified)",
         "and its egress is denied (verified)", ph.get("prepare"))
    if ok:
        st, r = req("DELETE", "/v1/envs/%s" % env)
        dd = wait_dep(r["deployment"]["ID"]) if st == 202 else {}
        closed = False
        try:
            urllib.request.urlopen("http://%s/" % ep, timeout=5)
        except OSError:
            closed = True
        t.ok(dd.get("deployment", {}).get("Status") == "succeeded" and closed,
             "destroying the sandbox closes its endpoint", dd)
finally:
    if d:
        d.kill()
        d.wait()
    cp.kill()
    cp.wait()
    if env:
        remove_project(env.lower())
sys.exit(t.done())
