"""Endpoints of egress-denied environments through denvd's own ingress
proxy (denvd __ingress): a one-service env (no network at all, loopback
only) and a two-service env (internal network) serve HTTP from the host
through 127.0.0.1:<port>; the egress probe still says BLOCKED; 1 MiB each
way passes intact; 50 connections at once; denvd killed (and the proxies
with it) and started again: the same endpoint answers; a restarted container
is followed, a removed one ends its proxy; env.destroy closes the port and
leaves no proxy process."""
import hashlib
import http.client
import os
import secrets
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, docker_leftovers, remove_project  # noqa: E402

binary, tmp = sys.argv[1], sys.argv[2]
t = TAP()
cp = FakeCP()
d = Denvd(binary, tmp, cp.url, token=cp.token,
          extra=["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"])
env1 = "env_IG" + secrets.token_hex(4).upper()
env2 = "env_IH" + secrets.token_hex(4).upper()
res_cap = {"memory_mb": 256, "pids": 256, "cpus": 1.0}

SERVER = r'''
import hashlib, http.server, socketserver, sys
BIG = bytes((i * 7 + 3) % 256 for i in range(1 << 20))
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def reply(self, body):
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        self.reply(BIG if self.path == "/big" else b"hello from " + sys.argv[2].encode() + b"\n")
    def do_POST(self):
        n = int(self.headers["Content-Length"]); data = b""
        while len(data) < n:
            chunk = self.rfile.read(n - len(data))
            if not chunk: break
            data += chunk
        self.reply(("%d %s" % (len(data), hashlib.sha256(data).hexdigest())).encode())
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True; request_queue_size = 128
S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def web(name, port):
    return {"name": name, "image": "denv-test/debian", "command": ["python3", "-c", SERVER, str(port), name],
            "env": {}, "ports": [str(port)], "volumes": [], "depends_on": [], "user": "", "resources": res_cap}


box = {"name": "side", "image": "denv-test/busybox", "command": ["sleep", "3600"], "env": {}, "ports": [],
       "volumes": [], "depends_on": [], "user": "", "resources": {"memory_mb": 64, "pids": 64, "cpus": 0.5}}


def hostport(ep):
    h, p = ep.rsplit(":", 1)
    return h, int(p)


def get(ep, path="/", timeout=10):
    h, p = hostport(ep)
    c = http.client.HTTPConnection(h, p, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def wait_get(ep, path="/", secs=30):
    end, last = time.time() + secs, None
    while time.time() < end:
        try:
            return get(ep, path)
        except (OSError, http.client.HTTPException) as e:
            last = e
            time.sleep(0.3)
    return None, repr(last)


def closed(ep):
    try:
        socket.create_connection(hostport(ep), timeout=3).close()
        return False
    except OSError:
        return True


def proxies(env):
    """pids of __ingress processes of env."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            args = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
        except OSError:
            continue
        if b"__ingress" in args and env.encode() in args:
            out.append(int(pid))
    return out


BIG = bytes((i * 7 + 3) % 256 for i in range(1 << 20))

try:
    d.start("join")
    t.ok(cp.wait_conn(15), "denvd joins")

    # 1. One service, egress denied: Docker's none network, loopback only.
    res, prog, _, _ = cp.command("env.create", env1, {"services": [web("web", 5000)], "volumes": [],
                                                      "egress": "deny"}, timeout=180)
    ok = bool(res and res["ok"])
    t.ok(ok, "one-service deny env created", res)
    p = res["payload"] if ok else {}
    ep = p.get("endpoints", {}).get("web", "")
    t.ok(ep.startswith("127.0.0.1:"), "endpoint reported as 127.0.0.1:port", p)
    t.ok(p.get("ingress", {}).get("web", {}).get("5000") == ep, "result says the port is proxied", p)
    t.ok(p.get("egress") == "denied (verified)" and p.get("egress_probe", {}).get("result") == "BLOCKED",
         "egress probe still BLOCKED", p.get("egress_probe"))
    t.ok(any("ingress proxy" in m for m in prog), "progress names the proxy", prog)
    net = os.popen("docker inspect -f '{{.HostConfig.NetworkMode}}' %s-web-1" % env1.lower()).read().strip()
    t.ok(net == "none", "the container has no network at all", net)
    st, body = wait_get(ep)
    t.ok(st == 200 and body == b"hello from web\n", "GET through the endpoint answers", (st, body))
    st, body = get(ep, "/big", timeout=30) if st == 200 else (None, b"")
    t.ok(st == 200 and len(body) == len(BIG) and body == BIG, "1 MiB response intact", (st, len(body)))
    if st == 200:
        h, pt = hostport(ep)
        c = http.client.HTTPConnection(h, pt, timeout=30)
        c.request("POST", "/up", body=BIG, headers={"Content-Length": str(len(BIG))})
        up = c.getresponse().read().decode()
        c.close()
    else:
        up = ""
    t.ok(up == "%d %s" % (len(BIG), hashlib.sha256(BIG).hexdigest()), "1 MiB upload intact", up)

    results = []
    barrier = threading.Barrier(50, timeout=30)

    def one(i):
        # All 50 connected through the proxy before any sends its request.
        try:
            c = http.client.HTTPConnection(*hostport(ep), timeout=30)
            c.connect()
            barrier.wait()
            c.request("GET", "/")
            results.append(c.getresponse().read() == b"hello from web\n")
            c.close()
        except Exception as e:  # noqa: BLE001
            results.append(repr(e))
    ths = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    t0 = time.time()
    for th in ths:
        th.start()
    for th in ths:
        th.join(60)
    t.ok(len(results) == 50 and all(r is True for r in results), "50 concurrent connections all answered",
         [r for r in results if r is not True][:3])
    t.diag("50 concurrent GETs in %.2f s" % (time.time() - t0))
    t0 = time.time()
    for _ in range(5):
        get(ep, "/big", timeout=30)
    t.diag("5 x 1 MiB GET through the proxy in %.2f s" % (time.time() - t0))
    # The listener is on loopback only.
    lines = [ln.split() for ln in open("/proc/net/tcp").read().splitlines()[1:]]
    port_hex = "%04X" % hostport(ep)[1]
    listening = [ln[1] for ln in lines if ln[3] == "0A" and ln[1].endswith(":" + port_hex)]
    t.ok(listening == ["0100007F:" + port_hex], "listening on 127.0.0.1 only", listening)

    # 2. Two services, egress denied: an internal network; ports on one of them.
    res, _, _, _ = cp.command("env.create", env2, {"services": [web("api", 8000), box], "volumes": [],
                                                   "egress": "deny"}, timeout=180)
    ok = bool(res and res["ok"])
    p2 = res["payload"] if ok else {}
    ep2 = p2.get("endpoints", {}).get("api", "")
    t.ok(ok and ep2.startswith("127.0.0.1:") and list(p2.get("endpoints", {})) == ["api"] and
         p2.get("egress_probe", {}).get("result") == "BLOCKED",
         "two-service deny env: one endpoint, probe BLOCKED", res)
    st, body = wait_get(ep2) if ep2 else (None, b"")
    t.ok(st == 200 and body == b"hello from api\n", "GET through the internal-network env's endpoint", (st, body))

    # 3. denvd killed, and its proxies with it; started again: the same endpoint answers.
    before = proxies(env1)
    t.ok(len(before) == 1, "one proxy process for the one-service env", before)
    fds = []
    for pid in before:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                fds.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
            except OSError:
                pass
    t.ok(fds and not [f for f in fds if "/commands/" in f] and len(fds) < 16,
         "the proxy holds no command lock or other inherited files", fds)
    d.kill(signal.SIGKILL)
    cp.closed.wait(10)
    st, body = get(ep) if before else (None, b"")
    t.ok(st == 200, "the proxy outlives denvd (its own session)", st)
    for pid in before + proxies(env2):
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.3)
    t.ok(closed(ep), "proxy killed: the port is closed")
    d.start("run")
    t.ok(cp.wait_conn(15), "denvd restarted")
    st, body = wait_get(ep, secs=15)
    after = proxies(env1)
    t.ok(st == 200 and body == b"hello from web\n" and after and after != before,
         "the same endpoint answers through a restarted proxy", (st, body, before, after, d.logtext()[-800:]))
    st, body = wait_get(ep2, secs=15)
    t.ok(st == 200, "the two-service env's endpoint too", (st, body))

    # 4. A rollback-like re-create keeps the host port.
    res, _, _, _ = cp.command("env.create", env1, {"services": [web("web", 5000)], "volumes": [],
                                                   "egress": "deny"}, timeout=180)
    t.ok(res and res["ok"] and res["payload"]["endpoints"].get("web") == ep,
         "creating the env again keeps its host port", res)
    st, body = wait_get(ep)
    t.ok(st == 200, "and it answers", (st, body))

    # 5. The container restarted: the proxy follows it into its new namespace; removed: the proxy exits.
    ctr2 = env2.lower() + "-api-1"
    pid_before = proxies(env2)
    os.system("docker restart -t 1 %s >/dev/null 2>&1" % ctr2)
    st, body = wait_get(ep2, secs=20)
    t.ok(st == 200 and proxies(env2) == pid_before, "after docker restart the same proxy answers", (st, body))
    os.system("docker rm -f %s >/dev/null 2>&1" % ctr2)
    end = time.time() + 10
    while proxies(env2) and time.time() < end:
        time.sleep(0.2)
    t.ok(not proxies(env2) and closed(ep2), "container removed: its proxy exits")

    # 6. env.destroy: port closed, no proxy left.
    for e, port in ((env1, ep), (env2, ep2)):
        res, _, _, _ = cp.command("env.destroy", e, {}, timeout=60)
        c, n = docker_leftovers(e.lower())
        t.ok(res and res["ok"] and not c and not n, "destroy %s leaves no containers or network" % e, (res, c, n))
        t.ok(closed(port) and not proxies(e), "destroy %s closes the port and leaves no proxy" % e, proxies(e))
finally:
    d.kill()
    for e in (env1, env2):
        for pid in proxies(e):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        remove_project(e.lower())
sys.exit(t.done())
