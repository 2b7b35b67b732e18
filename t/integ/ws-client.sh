#!/bin/sh
# ws-client.sh: the project's WebSocket client (t/helpers/ws-client.c:
# ws_dial) against Python's `websockets` server as an independent peer, over
# ws:// and wss:// (self-signed certificate trusted through DENV_CA_FILE),
# plus a raw socket server for handshake and framing faults. Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
build=${DENV_BUILD:-$PWD/build}
. "$top/t/lib/denvd-suite.sh"
helper=$build/helpers/ws-client
suite_need_websockets
[ -x "$helper" ] || suite_skip "$helper not built"
suite_tmp ws-client
have_tls=0
# Our own minimal config, so the test does not depend on the system's openssl.cnf.
printf '[req]\ndistinguished_name = dn\n[dn]\n' >"$tmp/openssl.cnf"
if command -v openssl >/dev/null 2>&1 &&
	OPENSSL_CONF=$tmp/openssl.cnf openssl req -config "$tmp/openssl.cnf" \
		-x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
		-addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
		-keyout "$tmp/key.pem" -out "$tmp/cert.pem" >/dev/null 2>&1; then
	have_tls=1
fi
"$py" - "$helper" "$tmp" "$have_tls" <<'PY'
import base64, hashlib, os, queue, socket, ssl, subprocess, sys, threading, time
from websockets.sync.server import serve
from websockets.exceptions import ConnectionClosed

helper, tmp, have_tls = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
n = 0
failed = 0
seen = {}   # what the Python server saw, by test key

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

def fnv(b):
    h = 2166136261
    for x in b:
        h = ((h ^ x) * 16777619) & 0xFFFFFFFF
    return "%08x" % h

def pattern(k):
    return bytes(i % 251 for i in range(k))

def handler(ws):
    path = ws.request.path
    try:
        if path == "/echo":
            for msg in ws:
                ws.send(msg)
        elif path == "/close1008":
            ws.recv()
            ws.close(1008, "policy violation reason")
        elif path == "/ping":
            got = ws.ping(b"srv").wait(5)
            ws.send("pong-ok" if got else "pong-missing")
            for msg in ws:
                ws.send(msg)
        elif path == "/big":
            ws.send(pattern(2 << 20))
            for msg in ws:
                ws.send(msg)
        elif path == "/auth":
            ws.send("authorized")
            for msg in ws:
                ws.send(msg)
    except ConnectionClosed:
        pass
    seen[path] = (ws.close_code, ws.close_reason)

def process_request(conn, request):
    if request.path == "/auth" and request.headers.get("Authorization") != "Bearer tok":
        return conn.respond(401, "invalid token: ask your admin for a new one\n")
    return None

def start_server(ctx=None):
    srv = serve(handler, "127.0.0.1", 0, max_size=None, ssl=ctx,
                process_request=process_request, ping_interval=None)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.socket.getsockname()[1]

class Client:
    def __init__(self, url, *args, env=None):
        e = dict(os.environ)
        e.pop("DENV_CA_FILE", None)
        if env:
            e.update(env)
        self.p = subprocess.Popen([helper, *args, url], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=e)
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def line(self, timeout=10):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return "(timeout)"

    def send(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()

    def finish(self):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass
        try:
            return self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return "killed"

def wait_seen(key, timeout=5):
    deadline = time.time() + timeout
    while key not in seen and time.time() < deadline:
        time.sleep(0.02)
    return seen.get(key)

def suite(base, label, env=None):
    c = Client(base + "/echo", env=env)
    ok(c.line() == "open", "%s: dial and handshake" % label)
    c.send("text héllo ✓")
    ok(c.line() == "text %d héllo ✓" % len("héllo ✓".encode()), "%s: text echo" % label)
    c.send("binary 100000")
    l = c.line()
    ok(l == "binary 100000 " + fnv(pattern(100000)), "%s: binary echo (100000 bytes, masked by us)" % label, l)
    c.send("ping hello")
    c.send("text after-ping")
    l = c.line()
    ok(l == "text 10 after-ping", "%s: our ping, then messages still flow" % label, l)
    seen.pop("/echo", None)
    c.send("close 1000 done here")
    l = c.line()
    ok(l == "close 1000 done here", "%s: client-initiated close reported by the client" % label, l)
    ok(c.finish() == 0, "%s: client exits cleanly" % label)
    s = wait_seen("/echo")
    ok(s == (1000, "done here"), "%s: the Python server saw close 1000 with the reason" % label, s)

    c = Client(base + "/close1008", env=env)
    c.line()
    c.send("text hi")
    l = c.line()
    ok(l == "close 1008 policy violation reason", "%s: server-initiated close 1008 with reason reported" % label, l)
    ok(c.finish() == 0, "%s: client exits after the server's close" % label)

    c = Client(base + "/ping", env=env)
    c.line()
    l = c.line()
    ok(l == "text 7 pong-ok", "%s: server ping answered by our client" % label, l)
    c.send("close 1000")
    c.line()
    c.finish()

srv, port = start_server()
try:
    suite("ws://127.0.0.1:%d" % port, "ws")

    c = Client("ws://127.0.0.1:%d/big" % port)
    c.line()
    l = c.line(20)
    ok(l == "binary %d %s" % (2 << 20, fnv(pattern(2 << 20))), "2 MiB message from the server", l)
    c.send("close 1000")
    c.line()
    c.finish()

    seen.pop("/big", None)
    c = Client("ws://127.0.0.1:%d/big" % port, "-max", "1000000")
    c.line()
    l = c.line(20)
    ok(l.startswith("close 1009 "), "message over the client's 1 MB limit -> 1009", l)
    c.finish()
    s = wait_seen("/big")
    ok(s is not None and s[0] == 1009, "the Python server saw 1009", s)

    c = Client("ws://127.0.0.1:%d/auth" % port)
    l = c.line()
    ok(l.startswith("dial-error 401 ") and "HTTP 401" in l and "invalid token: ask your admin" in l,
       "refused handshake: status and body in the error", l)
    ok(c.finish() == 1, "dial failure exits 1")
    c = Client("ws://127.0.0.1:%d/auth" % port, "-H", "Authorization: Bearer tok")
    ok(c.line() == "open" and c.line() == "text 10 authorized", "extra header (Authorization: Bearer) sent")
    c.send("close 1000")
    c.line()
    c.finish()
finally:
    srv.shutdown()

# Raw servers for faults the websockets library will not commit.
def raw_server(behaviour):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    def run():
        s, _ = ls.accept()
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                return
            data += chunk
        key = [l.split(b":", 1)[1].strip() for l in data.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key:")][0]
        acc = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        behaviour(s, acc)
        time.sleep(1)
        s.close()
        ls.close()
    threading.Thread(target=run, daemon=True).start()
    return "ws://127.0.0.1:%d/" % ls.getsockname()[1]

def wrong_accept(s, acc):
    s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n")

got_close = {}
def masked_frame(s, acc):
    # The 101 and, in the same write, a masked text frame: a server must not mask.
    s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Accept: " + acc + b"\r\n\r\n" + b"\x81\x82\x01\x02\x03\x04" + bytes([ord("h") ^ 1, ord("i") ^ 2]))
    s.settimeout(5)
    try:
        got_close["masked"] = s.recv(64)
    except OSError as e:
        got_close["masked"] = repr(e)

c = Client(raw_server(wrong_accept))
l = c.line()
ok(l.startswith("dial-error") and "Sec-WebSocket-Accept" in l, "wrong Sec-WebSocket-Accept refused", l)
c.finish()

c = Client(raw_server(masked_frame))
ok(c.line() == "open", "handshake with leftover frame bytes in the same packet")
l = c.line()
ok(l.startswith("close 1002 "), "masked frame from a server -> 1002", l)
c.finish()
deadline = time.time() + 5
while "masked" not in got_close and time.time() < deadline:
    time.sleep(0.02)
b = got_close.get("masked")
ok(isinstance(b, bytes) and len(b) >= 4 and b[0] == 0x88 and (b[1] & 0x80),
   "our close frame reached the server, masked", b)

if have_tls:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem"))
    srv, port = start_server(ctx)
    try:
        suite("wss://127.0.0.1:%d" % port, "wss", env={"DENV_CA_FILE": os.path.join(tmp, "cert.pem")})
        c = Client("wss://127.0.0.1:%d/echo" % port)
        l = c.line()
        ok(l.startswith("dial-error") and "certif" in l.lower(),
           "wss without trusting the self-signed certificate is refused", l)
        c.finish()
    finally:
        srv.shutdown()
else:
    print("# could not make a self-signed certificate with openssl: wss tests skipped")

print("1..%d" % n)
sys.exit(1 if failed else 0)
PY
