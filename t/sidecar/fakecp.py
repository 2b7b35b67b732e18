"""A fake control plane for denvd's tests: serves /v1/hosts/stream the way
protocol.md and doc/host-stream-chunks.md describe, admits hosts, sends
commands and chunk frames, and collects what the sidecar answers.

Named a fake on purpose: the real one is denv-cp ([F5])."""
import base64
import hashlib
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time

from websockets.sync.server import serve
from websockets.exceptions import ConnectionClosed

CHUNK = 1 << 20


class TAP:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, name, diag=None, todo=False):
        self.n += 1
        if not cond and not todo:
            self.failed += 1
        print(("ok" if cond else "not ok") + " %d - %s%s" % (self.n, name, " # TODO known failure" if todo else ""))
        if not cond and diag is not None:
            for line in str(diag).splitlines()[:40]:
                print("#   " + line)
        sys.stdout.flush()
        return cond

    def todo(self, cond, name, diag=None):
        """A known failure: counted, never failing the run (TAP's TODO)."""
        return self.ok(cond, name, diag, todo=True)

    def diag(self, msg):
        for line in str(msg).splitlines():
            print("# " + line)
        sys.stdout.flush()

    def done(self):
        print("1..%d" % self.n)
        sys.stdout.flush()
        return 1 if self.failed else 0


class FakeCP:
    def __init__(self, token="djt_test"):
        self.token = token
        self.hosts = {}            # host_id -> secret
        self.frames = queue.Queue()
        self.conn = None
        self.hellos = []
        self.closed = threading.Event()
        self.refuse_all = False
        self.lock = threading.Lock()
        self.server = serve(self._handler, "127.0.0.1", 0, max_size=16 << 20)
        self.port = self.server.socket.getsockname()[1]
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self, ws):
        if ws.request.path != "/v1/hosts/stream":
            ws.close(1008, "wrong path")
            return
        try:
            hello = json.loads(ws.recv(timeout=10))
        except Exception:
            return
        self.hellos.append(hello)
        p = hello.get("payload") or {}
        hid, tok = p.get("host_id", ""), p.get("token", "")
        if self.refuse_all:
            ws.close(1008, "host refused")
            return
        if not hid:
            if tok != self.token:
                ws.close(1008, "join token invalid")
                return
            self.token = None      # single use
            hid = "host_" + secrets.token_hex(8)
            sec = "dhs_" + secrets.token_hex(16)
            self.hosts[hid] = sec
            ws.send(json.dumps({"type": "hello", "host_id": hid, "payload": {"host_id": hid, "secret": sec}}))
        elif self.hosts.get(hid) != tok:
            ws.close(1008, "unknown host or wrong secret")
            return
        else:
            ws.send(json.dumps({"type": "hello", "host_id": hid, "payload": {"host_id": hid}}))
        with self.lock:
            self.conn = ws
        self.closed.clear()
        try:
            for msg in ws:
                self.frames.put(json.loads(msg))
        except ConnectionClosed:
            pass
        finally:
            with self.lock:
                if self.conn is ws:
                    self.conn = None
            self.closed.set()

    def wait_conn(self, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            if self.conn is not None:
                return True
            time.sleep(0.05)
        return False

    def send(self, frame):
        with self.lock:
            c = self.conn
        if c is None:
            raise RuntimeError("no sidecar connected")
        c.send(json.dumps(frame))

    def next(self, pred, timeout):
        """The next frame matching pred; others are kept in self.other."""
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                return None
            try:
                f = self.frames.get(timeout=left)
            except queue.Empty:
                return None
            if pred(f):
                return f

    def drain(self):
        out = []
        while True:
            try:
                out.append(self.frames.get_nowait())
            except queue.Empty:
                return out

    def command(self, kind, env="", payload=None, cid=None, timeout=300, collect=None):
        """Send a command and wait for its result. Returns (result, progress, acks, chunks)."""
        cid = cid or "cmd_" + secrets.token_hex(8)
        f = {"type": "command", "command_id": cid, "kind": kind, "payload": payload or {}}
        if env:
            f["env_id"] = env
        self.send(f)
        return self.collect(cid, timeout)

    def collect(self, cid, timeout=300):
        progress, acks, chunks = [], 0, []
        end = time.time() + timeout
        while True:
            f = self.next(lambda x: x.get("command_id") == cid, end - time.time())
            if f is None:
                return None, progress, acks, chunks
            t = f.get("type")
            if t == "ack":
                acks += 1
            elif t == "progress":
                progress.append(f.get("message", ""))
            elif t == "chunk":
                chunks.append(f)
            elif t == "result":
                return f, progress, acks, chunks

    def put(self, env, service, path, tar_bytes, timeout=120, cid=None):
        cid = cid or "cmd_" + secrets.token_hex(8)
        n = max(1, (len(tar_bytes) + CHUNK - 1) // CHUNK)
        for i in range(n):
            part = tar_bytes[i * CHUNK:(i + 1) * CHUNK]
            self.send({"type": "chunk", "command_id": cid, "seq": i, "last": i == n - 1,
                       "data": base64.b64encode(part).decode()})
        payload = {"service": service, "path": path, "tar_bytes": len(tar_bytes),
                   "tar_sha256": hashlib.sha256(tar_bytes).hexdigest(), "tar_chunks": n}
        return self.command("env.put", env, payload, cid=cid, timeout=timeout)

    def get(self, env, service, path, timeout=120, cid=None):
        """(archive bytes or None, result, problem)."""
        res, _, _, chunks = self.command("env.get", env, {"service": service, "path": path},
                                         cid=cid, timeout=timeout)
        return self.assemble(res, chunks)

    @staticmethod
    def assemble(res, chunks):
        if not res or not res.get("ok"):
            return None, res, "no ok result"
        p = res["payload"]
        if [c["seq"] for c in chunks] != list(range(len(chunks))):
            return None, res, "chunks out of order: %r" % [c["seq"] for c in chunks]
        if not chunks or not chunks[-1].get("last") or any(c.get("last") for c in chunks[:-1]):
            return None, res, "last flag wrong"
        data = b"".join(base64.b64decode(c["data"]) for c in chunks)
        if len(chunks) != p["tar_chunks"] or len(data) != p["tar_bytes"] or \
                hashlib.sha256(data).hexdigest() != p["tar_sha256"]:
            return None, res, "count/size/sha mismatch"
        return data, res, None


class Denvd:
    """bin/denvd as a child process, its log in a file."""

    def __init__(self, binary, tmp, server, extra=(), verb="join", token=None, name="denvd"):
        self.binary, self.tmp, self.server = binary, tmp, server
        self.state = os.path.join(tmp, "state", "host.json")
        self.data = os.path.join(tmp, "data")
        self.extra, self.verb, self.token, self.name = list(extra), verb, token, name
        self.proc = None
        self.logpath = os.path.join(tmp, name + ".log")

    def start(self, verb=None, token=None):
        args = [self.binary, verb or self.verb, "--server", self.server, "--state", self.state,
                "--data", self.data] + self.extra
        tok = token if token is not None else self.token
        if tok:
            args += ["--token", tok]
        self.log = open(self.logpath, "ab")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        return self.proc

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def logtext(self):
        try:
            return open(self.logpath, errors="replace").read()
        except OSError:
            return ""


def docker(*args, check=False):
    return subprocess.run(["docker"] + list(args), capture_output=True, text=True, check=check)


def docker_leftovers(project):
    """Containers and networks of a compose project that still exist."""
    c = docker("ps", "-aq", "--filter", "label=com.docker.compose.project=" + project).stdout.split()
    n = docker("network", "ls", "-q", "--filter", "name=^" + project + "_default$").stdout.split()
    return c, n


def remove_project(project):
    c, n = docker_leftovers(project)
    if c:
        docker("rm", "-f", "-v", *c)
    for net in n:
        docker("network", "rm", net)
