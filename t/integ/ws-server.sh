#!/bin/sh
# ws-server.sh: the project's WebSocket server (t/helpers/ws-echo.c: HTTP
# server + ws_accept) driven by Python's `websockets` client as an
# independent peer. Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
build=${DENV_BUILD:-$PWD/build}
. "$top/t/lib/denvd-suite.sh"
helper=$build/helpers/ws-echo
suite_need_websockets
[ -x "$helper" ] || suite_skip "$helper not built"
exec "$py" - "$helper" <<'PY'
import http.client, os, queue, subprocess, sys, threading, time
from websockets.sync.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

helper = sys.argv[1]
n = 0
failed = 0

def ok(cond, name, diag=None):
    global n, failed
    n += 1
    if not cond:
        failed += 1
    print(("ok" if cond else "not ok") + " %d - %s" % (n, name))
    if not cond and diag is not None:
        for line in str(diag).splitlines():
            print("#   " + line)
    sys.stdout.flush()
    return cond

class Helper:
    def __init__(self, *args):
        self.p = subprocess.Popen([helper, *args], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, text=True)
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        line = self.line(10)
        if not line or not line.startswith("port "):
            raise SystemExit("Bail out! ws-echo did not start: %r" % line)
        self.port = int(line.split()[1])
        self.url = "ws://127.0.0.1:%d/ws" % self.port

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def line(self, timeout=10):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None

    def expect(self, prefix, timeout=10):
        deadline = time.time() + timeout
        seen = []
        while time.time() < deadline:
            line = self.line(deadline - time.time())
            if line is None:
                break
            if line.startswith(prefix):
                return line
            seen.append(line)
        return "(none; saw %r)" % seen

    def stop(self):
        self.p.terminate()
        try:
            return self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return -9

def closed_code(ws, send):
    """Send, then read until the connection closes; return (code, reason, seconds)."""
    t0 = time.time()
    try:
        send()
        while True:
            ws.recv(timeout=10)
    except ConnectionClosed as e:
        return (e.rcvd.code if e.rcvd else None, e.rcvd.reason if e.rcvd else None, time.time() - t0)
    except TimeoutError:
        return (None, "timeout", time.time() - t0)

h = Helper("-max", "1048576")
try:
    with connect(h.url, max_size=None, compression=None) as ws:
        ws.send("héllo, wörld ✓")
        ok(ws.recv(timeout=10) == "héllo, wörld ✓", "text echo (non-ASCII)")
        data = bytes(range(256)) * 4
        ws.send(data)
        got = ws.recv(timeout=10)
        ok(isinstance(got, bytes) and got == data, "binary echo")
        big = os.urandom(1 << 20)
        ws.send(big)
        got = ws.recv(timeout=30)
        ok(got == big, "1 MiB binary message echoed intact")
        ws.send(["frag", "ment", "ed ✓", ""])
        ok(ws.recv(timeout=10) == "fragmented ✓", "fragmented text message from the client assembled")
        ws.send([b"\x00\x01", b"\x02" * 70000, b"\x03"])
        got = ws.recv(timeout=10)
        ok(got == b"\x00\x01" + b"\x02" * 70000 + b"\x03", "fragmented binary message with a 64-bit-length fragment")
        pong = ws.ping(b"are you there")
        ok(pong.wait(5), "ping from the client answered with a pong")
        ws.send("ping:srv")
        ws.send("after ping")
        ok(ws.recv(timeout=10) == "after ping", "server-sent ping answered by the client; messages still flow")
        ws.close(1000, "bye now")
        ok(ws.close_code == 1000 and ws.close_reason == "bye now",
           "client-initiated close 1000: the client sees code and reason",
           "%r %r" % (ws.close_code, ws.close_reason))
    line = h.expect("close ")
    ok(line == "close 1000 bye now", "client-initiated close 1000: the server sees code and reason", line)

    with connect(h.url, max_size=None) as ws:
        code, reason, _ = closed_code(ws, lambda: ws.send("close:1008:policy violation reason"))
        ok(code == 1008 and reason == "policy violation reason",
           "server-initiated ws_close(1008, reason) reaches the client", "%r %r" % (code, reason))
    line = h.expect("close ")
    ok(line == "close 1008 policy violation reason", "server reports the completed 1008 close", line)

    with connect(h.url, max_size=None) as ws:
        code, reason, secs = closed_code(ws, lambda: ws.send(b"\xce\xbb\xff\xfe", text=True))
        ok(code == 1007, "invalid UTF-8 text gets close 1007", "%r %r" % (code, reason))
        ok(secs < 4, "1007 close completes promptly (%.2fs)" % secs)
    line = h.expect("close ")
    ok(line.startswith("close 1007 "), "server reports 1007", line)

    # Bad upgrades answered by the HTTP side.
    c = http.client.HTTPConnection("127.0.0.1", h.port, timeout=10)
    c.request("GET", "/ws")
    r = c.getresponse()
    body = r.read()
    ok(r.status == 400 and b"Upgrade" in body, "plain GET on the WebSocket route -> 400", "%d %r" % (r.status, body))
    c.close()
    c = http.client.HTTPConnection("127.0.0.1", h.port, timeout=10)
    c.request("GET", "/ws", headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                     "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                                     "Sec-WebSocket-Version": "8"})
    r = c.getresponse()
    r.read()
    ok(r.status == 426 and r.getheader("Sec-WebSocket-Version") == "13",
       "wrong Sec-WebSocket-Version -> 426 with Sec-WebSocket-Version: 13", "%d %r" % (r.status, r.getheaders()))
    c.close()
    c = http.client.HTTPConnection("127.0.0.1", h.port, timeout=10)
    c.request("GET", "/ws", headers={"Upgrade": "websocket", "Connection": "Upgrade",
                                     "Sec-WebSocket-Key": "short", "Sec-WebSocket-Version": "13"})
    r = c.getresponse()
    r.read()
    ok(r.status == 400, "malformed Sec-WebSocket-Key -> 400", r.status)
    c.close()
finally:
    h.stop()

# A small message limit: over it -> 1009, checked as the frame arrives.
h = Helper("-max", "65536")
try:
    with connect(h.url, max_size=None) as ws:
        ws.send(b"x" * 65536)
        ok(len(ws.recv(timeout=10)) == 65536, "message at exactly the 64 KiB limit is accepted")
        code, reason, secs = closed_code(ws, lambda: ws.send(b"y" * 70000))
        ok(code == 1009, "message over the 64 KiB limit gets close 1009", "%r %r" % (code, reason))
        ok(secs < 4, "1009 close completes promptly (%.2fs)" % secs)
    line = h.expect("close ")
    ok(line.startswith("close 1009 "), "server reports 1009", line)
    with connect(h.url, max_size=None) as ws:
        code, reason, _ = closed_code(ws, lambda: ws.send([b"z" * 40000, b"z" * 40000]))
        ok(code == 1009, "fragmented message passing the limit gets 1009 at the second fragment", "%r %r" % (code, reason))
    h.expect("close ")
finally:
    h.stop()

# Keepalive: a server pinging every 200 ms keeps a live client connected.
h = Helper("-ping-interval", "200")
try:
    with connect(h.url, max_size=None, ping_interval=None) as ws:
        time.sleep(1.0)
        ws.send("still here")
        ok(ws.recv(timeout=10) == "still here", "keepalive pings answered, connection stays up")
        ws.close()
    line = h.expect("close ")
    ok(line.startswith("close 1005") or line.startswith("close 1000"), "close without reason", line)
finally:
    rc = h.stop()
    ok(rc == 0, "ws-echo exits cleanly on SIGTERM (status %s)" % rc)

print("1..%d" % n)
sys.exit(1 if failed else 0)
PY
