"""The egress probe against a test server that stands in for the internet:
it lives in a network namespace of its own (made by denvd-egress.sh), routed
through this host, so a container on an ordinary Docker network reaches it
and one on an internal network does not. Checks both probe ways (netns and
container), the failure when the network is deliberately not internal, and
the failure when the probe cannot run."""
import os
import secrets
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, docker, docker_leftovers, remove_project  # noqa: E402

binary, tmp, ns, addr = sys.argv[1:5]
port = 18000 + secrets.randbelow(2000)
url = "http://%s:%d/" % (addr, port)
t = TAP()

SERVER = r'''
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(16)
print("ready", flush=True)
while True:
    c, peer = s.accept()
    print("conn", peer[0], flush=True)
    try:
        c.settimeout(2); c.recv(4096)
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    except OSError:
        pass
    c.close()
'''
srvlog = os.path.join(tmp, "server.log")
srv = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", SERVER, addr, str(port)],
                       stdin=subprocess.DEVNULL, stdout=open(srvlog, "w"), stderr=subprocess.STDOUT,
                       start_new_session=True)


def conns():
    return sum(1 for line in open(srvlog) if line.startswith("conn"))


tag = secrets.token_hex(4)
opennet = "denvt-open-" + tag
projects = []
instances = []
svc = [{"name": "app", "image": "denv-test/busybox", "command": ["sleep", "3600"], "env": {}, "ports": [],
        "volumes": [], "depends_on": [], "user": "", "resources": {"memory_mb": 64, "pids": 64, "cpus": 0.5}}]


def sidecar(name, *extra):
    cp = FakeCP()
    d = Denvd(binary, os.path.join(tmp, name), cp.url, token=cp.token, name=name,
              extra=["--probe-image", "denv-test/busybox", "--probe-url", url] + list(extra))
    os.makedirs(d.tmp, exist_ok=True)
    d.start()
    instances.append(d)
    t.ok(cp.wait_conn(15), "%s joins" % name, d.logtext())
    return cp, d


def create(cp, label):
    env = "env_EG" + label.upper() + secrets.token_hex(3).upper()
    projects.append(env.lower())
    t0 = time.time()
    res, prog, _, _ = cp.command("env.create", env, {"services": svc, "volumes": [], "egress": "deny"},
                                 timeout=120)
    return env, res, prog, time.time() - t0


try:
    end = time.time() + 10
    while time.time() < end and "ready" not in open(srvlog).read():
        time.sleep(0.05)
    t.ok("ready" in open(srvlog).read(), "test server listening in its own netns at " + url, open(srvlog).read())

    # The server is reachable from an ordinary (non-internal) Docker network.
    docker("network", "create", "--label", "denvt=" + tag, opennet)
    r = docker("run", "--rm", "--network", opennet, "--label", "denvt=" + tag, "denv-test/busybox",
               "wget", "-q", "-O", "-", url)
    t.ok(r.returncode == 0 and r.stdout == "ok\n" and conns() == 1,
         "a container on a non-internal network reaches the test server", r)
    docker("network", "rm", opennet)

    cp, d = sidecar("netns")
    before = conns()
    env, res, prog, took = create(cp, "n")
    t.diag("create with the netns probe: %.1f s" % took)
    p = (res or {}).get("payload", {})
    t.ok(res and res["ok"] and p.get("egress") == "denied (verified)" and
         p.get("egress_probe", {}).get("method") == "netns" and p["egress_probe"].get("result") == "BLOCKED",
         "egress denied (verified) by the netns probe", (res, prog))
    t.ok(conns() == before, "nothing from the stack reached the server")
    cp.command("env.destroy", env, {}, timeout=60)
    d.kill()

    cp, d = sidecar("container", "--probe-mode", "container")
    env, res, prog, took = create(cp, "c")
    t.diag("create with the probe container: %.1f s" % took)
    p = (res or {}).get("payload", {})
    t.ok(res and res["ok"] and p.get("egress") == "denied (verified)" and
         p.get("egress_probe", {}).get("method") == "container", "egress denied (verified) by a probe container",
         (res, prog))
    t.ok(conns() == before, "still nothing reached the server")
    cp.command("env.destroy", env, {}, timeout=60)
    d.kill()

    for mode in ("netns", "container"):
        cp, d = sidecar("leaky-" + mode, "--test-leaky-network", "--probe-mode", mode)
        before = conns()
        env, res, prog, took = create(cp, "l" + mode[0])
        t.ok(res and res["ok"] is False and res["error"] == "egress is denied but the stack reached the internet",
             "not internal (test flag), %s probe: the create fails as the spec says" % mode, (res, prog))
        t.ok(conns() > before, "the %s probe did reach the server" % mode)
        c, n = docker_leftovers(env.lower())
        t.ok(not c and not n, "the stack was stopped", (c, n))
        d.kill()

    # egress allow: ports published on 127.0.0.1 and reported as endpoints.
    cp, d = sidecar("allow")
    env = "env_EGA" + secrets.token_hex(3).upper()
    projects.append(env.lower())
    web = dict(svc[0], name="web", command=["httpd", "-f", "-p", "8080", "-h", "/tmp"], ports=["8080"])
    res, prog, _, _ = cp.command("env.create", env, {"services": [web], "volumes": [], "egress": "allow"},
                                 timeout=120)
    p = (res or {}).get("payload", {})
    ep = p.get("endpoints", {}).get("web", "")
    t.ok(res and res["ok"] and p.get("egress") == "allowed" and ep.startswith("127.0.0.1:") and
         "healthy; egress allowed" in prog, "egress allow: the port is published as an endpoint", (res, prog))
    try:
        host, prt = ep.split(":")
        s = socket.create_connection((host, int(prt)), timeout=5)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        answer = s.recv(100)
        s.close()
    except (OSError, ValueError) as ex:
        answer = repr(ex).encode()
    t.ok(answer.startswith(b"HTTP/1."), "the endpoint answers from the host", answer)
    net = docker("network", "inspect", "--format", "{{.Internal}}", env.lower() + "_default").stdout.strip()
    t.ok(net == "false", "an egress-allowed network is not internal")
    cp.command("env.destroy", env, {}, timeout=60)
    d.kill()

    cp, d = sidecar("noimage", "--probe-mode", "container", "--probe-image", "denv-test/none:missing")
    env, res, prog, took = create(cp, "x")
    t.ok(res and res["ok"] is False and res["error"].startswith("egress probe failed to run: "),
         "a probe that cannot run fails the create", res)
    d.kill()
finally:
    for d in instances:
        d.kill()
    for pr in projects:
        remove_project(pr)
    docker("network", "rm", opennet)
    srv.kill()
    srv.wait()
sys.exit(t.done())
