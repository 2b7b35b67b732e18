"""A FAKE control plane for the CLI's tests of routes the real denv-cp does
not serve yet (fork, snapshot, verify, rollback, exec, files, the live event
stream). It answers in the shapes of api.md; deployments advance one phase
every STEP seconds. Standard library only.

Usage: fake_cp.py PORTFILE [--ws]   (writes the bound port to PORTFILE)
--ws serves GET /v1/events/stream as a WebSocket pushing one event per phase
change; without it that route is a 404, so the CLI must poll.
GET /_stats answers counters the tests check.
"""
import base64
import hashlib
import io
import json
import socket
import sys
import tarfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs

KEY = "dak_fake"
STEP = 0.1
WS = "--ws" in sys.argv
LOCK = threading.Lock()
DEPS = {}
STATS = {"ws": 0, "dep_gets": 0, "uploads": []}
ENVS = [{"ID": "env_alpha", "Name": "alpha", "ProjectID": "prj_q"},
        {"ID": "env_beta", "Name": "beta", "ProjectID": "prj_q"}]
# A second project, for bare environment names: "alpha" is in both, "gamma"
# only here, "old" only as a destroyed environment.
PROJECTS = [{"ID": "prj_q", "Name": "q"}, {"ID": "prj_r", "Name": "r"}]
ENVS_R = [{"ID": "env_r_alpha", "Name": "alpha", "ProjectID": "prj_r", "Status": "running"},
          {"ID": "env_gamma", "Name": "gamma", "ProjectID": "prj_r", "Status": "running"},
          {"ID": "env_old", "Name": "old", "ProjectID": "prj_r", "Status": "destroyed"}]
LIVE = ("env_alpha", "env_beta", "env_r_alpha", "env_gamma")


def now():
    return time.time()


def new_dep(kind, env, phases, fail_at=None, evidence=None):
    dep_id = "dep_%s_%d" % (kind, len(DEPS) + 1)
    target = "env_fork_%d" % (len(DEPS) + 1) if kind == "fork" else env
    DEPS[dep_id] = {"kind": kind, "env": target, "phases": phases, "fail_at": fail_at,
                    "evidence": evidence or {}, "start": now()}
    return dep_id


def dep_doc(dep_id):
    d = DEPS[dep_id]
    steps = int((now() - d["start"]) / STEP)  # each phase: running, then done
    phases = []
    failed = False
    for i, name in enumerate(d["phases"]):
        status, err, ev = "pending", "", None
        if failed:
            status = "skipped" if steps > 2 * i else "pending"
        elif steps > 2 * i + 1:
            if d["fail_at"] == name:
                status, err, failed = "failed", "host said no", True
            else:
                status, ev = "ok", d["evidence"].get(name, {"step": i})
        elif steps > 2 * i:
            status = "running"
        if name == "verdict" and failed and steps > 2 * i:
            status = "ok"
        phases.append({"DeploymentID": dep_id, "Seq": i + 1, "Name": name, "Status": status,
                       "Evidence": ev, "Error": err, "StartedAt": None, "FinishedAt": None})
    done = steps > 2 * len(d["phases"])
    st = "running" if steps > 0 else "pending"
    if done:
        st = "failed" if failed else "succeeded"
    return {"deployment": {"ID": dep_id, "EnvID": d["env"], "Kind": d["kind"], "Status": st,
                           "Error": "%s: host said no" % d["fail_at"] if failed and done else ""},
            "phases": phases}


def tar_of(kind):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as t:
        def add(name, data=b"x", typ=tarfile.REGTYPE, link=""):
            ti = tarfile.TarInfo(name)
            ti.type = typ
            ti.linkname = link
            ti.mode = 0o644
            if typ == tarfile.REGTYPE:
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
            else:
                t.addfile(ti)
        if kind == "good":
            add("logs/", typ=tarfile.DIRTYPE)
            add("logs/a.txt", b"alpha\n")
            add("logs/b.txt", b"beta\n")
        elif kind == "dotdot":
            add("ok.txt", b"fine\n")
            add("../escaped.txt", b"evil\n")
        elif kind == "symlink":
            add("link", typ=tarfile.SYMTYPE, link="../../../etc")
            add("link/pwned", b"evil\n")
    return b.getvalue()


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_json(self, status, doc):
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def authed(self):
        if self.headers.get("Authorization") != "Bearer " + KEY:
            self.send_json(401, {"error": "invalid API key"})
            return False
        return True

    def do_GET(self):
        u = urlparse(self.path)
        p = u.path.split("/")
        if u.path == "/_stats":
            return self.send_json(200, STATS)
        if not self.authed():
            return
        if u.path == "/v1/events/stream":
            if not WS:
                return self.send_json(404, {"error": "not found"})
            return self.websocket()
        if u.path == "/v1/me":
            return self.send_json(200, {"team": {"ID": "team_f", "Name": "fake"}, "teams": []})
        if u.path == "/v1/projects":
            return self.send_json(200, {"projects": PROJECTS})
        if len(p) == 5 and p[1:3] == ["v1", "projects"] and p[4] == "envs":
            if p[3] in ("q", "prj_q"):
                return self.send_json(200, {"environments": ENVS})
            if p[3] in ("r", "prj_r"):
                return self.send_json(200, {"environments": ENVS_R})
            return self.send_json(404, {"error": "project not found"})
        if len(p) == 4 and p[1:3] == ["v1", "deployments"]:
            with LOCK:
                STATS["dep_gets"] += 1
                if p[3] not in DEPS:
                    return self.send_json(404, {"error": "deployment not found"})
                return self.send_json(200, dep_doc(p[3]))
        if len(p) == 4 and p[1:3] == ["v1", "envs"]:
            return self.send_json(200, {"environment": {"ID": p[3], "Name": "alpha"}, "connected": True})
        if len(p) == 5 and p[1:3] == ["v1", "envs"] and p[4] == "files":
            q = parse_qs(u.query)
            kind = q.get("path", [""])[0].strip("/")
            if q.get("service") != ["box"]:
                return self.send_json(400, {"error": "service is required"})
            data = tar_of(kind)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-tar")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_json(404, {"error": "not found"})

    def do_PUT(self):
        u = urlparse(self.path)
        if not self.authed():
            return
        data = self.body()
        q = parse_qs(u.query)
        try:
            names = sorted(tarfile.open(fileobj=io.BytesIO(data)).getnames())
        except tarfile.TarError as e:
            return self.send_json(400, {"error": "bad tar: %s" % e})
        with LOCK:
            STATS["uploads"].append({"path": u.path, "service": q.get("service", [""])[0],
                                     "dest": q.get("target", q.get("path", [""]))[0],
                                     "key": "target" if "target" in q else "path",
                                     "owner": q.get("owner", [None])[0], "names": names,
                                     "ctype": self.headers.get("Content-Type")})
        self.send_json(200, {"ok": True, "bytes": len(data)})

    def do_POST(self):
        u = urlparse(self.path)
        p = u.path.split("/")
        if not self.authed():
            return
        raw = self.body()
        req = json.loads(raw) if raw else None
        if len(p) != 5 or p[1:3] != ["v1", "envs"]:
            return self.send_json(404, {"error": "not found"})
        env, verb = p[3], p[4]
        if env not in LIVE:
            return self.send_json(404, {"error": "environment not found"})
        with LOCK:
            STATS["last_" + verb] = req
            if verb == "exec":
                return self.exec_answer(env, req["cmd"])
            if verb == "fork":
                dep = new_dep("fork", env, ["place", "clone", "health", "verdict"])
            elif verb == "snapshot":
                dep = new_dep("snapshot", env, ["snapshot", "health", "verdict"], fail_at="health")
            elif verb == "rollback":
                dep = new_dep("rollback", env, ["rollback", "health", "verdict"])
            elif verb == "verify":
                ev = {"verdict": {"reward": 1, "source": "reward.txt", "exit_code": 0, "refused": [],
                                  "missing": [], "agent_frozen": not req.get("resume"), "took_ms": 5}}
                dep = new_dep("verify", env, ["stop", "collect", "snapshot", "clone", "grade", "verdict"],
                              evidence=ev)
            else:
                return self.send_json(404, {"error": "not found"})
            return self.send_json(202, dep_doc(dep))

    def exec_answer(self, env, cmd):
        """exec by the command's first word: timeout (the host's 502), cpgone
        (the control plane's own timeout), frozen (a refusal), nocode (no
        exit code), exit N; else exit 3 with the argv as stdout."""
        if cmd[0] == "timeout":
            return self.send_json(502, {"error": "env.exec: timed out after 1 s (the process was killed)"})
        if cmd[0] == "cpgone":
            return self.send_json(502, {"error": "env.exec timed out after 31 s"})
        if cmd[0] == "frozen":
            return self.send_json(502, {"error": 'env.exec: service "box" is frozen by verify; resume it with '
                                               '`denv verify --resume %s`' % env})
        if cmd[0] == "nocode":
            return self.send_json(200, {"stdout": "x", "stderr": ""})
        code = int(cmd[1]) if cmd[0] == "exit" else 3
        return self.send_json(200, {"exit_code": code, "stdout": json.dumps(cmd) + "\nline 2\n",
                                    "stderr": "err 1\nerr 2\n"})

    def websocket(self):
        self.close_connection = True
        key = self.headers.get("Sec-WebSocket-Key", "")
        acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", acc.decode())
        self.end_headers()
        self.wfile.flush()
        with LOCK:
            STATS["ws"] += 1
        seen = {}
        self.connection.settimeout(0.05)
        while True:
            # Drain (and ignore) anything the client sends; stop on EOF.
            try:
                if self.connection.recv(4096) == b"":
                    return
            except socket.timeout:
                pass
            except OSError:
                return
            with LOCK:
                changes = []
                for dep_id in DEPS:
                    doc = dep_doc(dep_id)
                    sig = json.dumps(doc)
                    if seen.get(dep_id) != sig:
                        seen[dep_id] = sig
                        changes.append({"ID": "evt_%d" % len(changes), "TeamID": "team_f",
                                        "Subject": "dep:" + dep_id, "Kind": "phase",
                                        "Body": doc["deployment"]["Status"], "At": time.time()})
            try:
                for ev in changes:
                    payload = json.dumps(ev).encode()
                    self.connection.sendall(bytes([0x81, len(payload)]) + payload if len(payload) < 126
                                            else bytes([0x81, 126]) + len(payload).to_bytes(2, "big") + payload)
            except OSError:
                return
            time.sleep(0.02)


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    srv.serve_forever()


if __name__ == "__main__":
    main()
