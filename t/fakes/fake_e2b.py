"""A FAKE of the E2B API, for tests only. Loopback only.

Its sandboxes are real enough to run a command: each one is a Docker
container (`docker run -d --network none`, labelled denv-fake-e2b) of the
template's image: "base" is denv-test/debian:latest (it has the /bin/bash the
SDK's commands.run starts), any other template names a local image.

Shapes are those of the e2b Python SDK 2.56.0. The REST API
(e2b/api/client/api/sandboxes/*.py, models/new_sandbox.py, models/sandbox.py,
models/error.py; the key travels as X-API-KEY, e2b/api/__init__.py):

  GET    /v2/sandboxes?limit=N   200 [ListedSandbox]       (the token check)
  POST   /v2/sandboxes (and /sandboxes) {templateID, timeout?, metadata?, envVars?}
                                 201 {templateID, sandboxID, clientID, envdVersion, envdAccessToken, domain}
  DELETE /sandboxes/{id}         204
  POST   /sandboxes/{id}/pause   204 (409 when already paused)
  POST   /sandboxes/{id}/resume {timeout?}   201 Sandbox (the older route)
  POST   /sandboxes/{id}/connect {timeout}   200 running, 201 resumed: Sandbox (also under /v2)
  401 {code: 401, message: "Invalid API key"}; 404 {code: 404, message}

and envd, the agent inside a sandbox (e2b/envd/process/process_pb.py,
envd/api.py, sandbox_sync/filesystem/filesystem.py). The real service serves
it at https://49983-{sandboxID}.{domain}; with E2B_SANDBOX_URL (the SDK) or
DENV_E2B_SANDBOX_URL (denv-cp) every sandbox is reached at one URL and told
apart by the E2b-Sandbox-Id header, as E2B's own sandbox proxy does. Here
that URL is this server's (FakeE2B().url):

  POST /process.Process/Start    Connect server stream, JSON codec
       (application/connect+json): one enveloped StartRequest
       {process: {cmd, args, envs, cwd}}; answered by enveloped StartResponse
       {event: {start: {pid}}}, {event: {data: {stdout|stderr: base64}}},
       {event: {end: {exitCode, exited, status}}}, then the end-of-stream
       envelope (flag 2) {} or {error: {code, message}}
  GET  /files?path=P             200 the bytes; 404 {code, message}
  POST /files?path=P             application/octet-stream body: 200 [{name, type, path}]
       (multipart/form-data also, one file)

Knobs: `key` (the one accepted), `sandboxes` (extra rows for the list), and
FakeAPI's `plan` and `delay`. Run it: python3 t/fakes/fake_e2b.py [port].
"""
import base64
import email.parser
import json
import os
import posixpath
import struct
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakeapi import FakeAPI  # noqa: E402

LABEL = "denv-fake-e2b"
TEMPLATES = {"base": "denv-test/debian:latest"}
ENVD_VERSION = "0.5.7"  # octet-stream uploads (ENVD_OCTET_STREAM_UPLOAD), no newer features
STREAM = {"Content-Type": "application/connect+json"}


def docker(*args, data=None, timeout=60):
    return subprocess.run(["docker"] + list(args), input=data, capture_output=True, timeout=timeout)


def envelope(doc, flags=0):
    b = json.dumps(doc).encode()
    return struct.pack(">BI", flags, len(b)) + b


class FakeE2B(FakeAPI):
    def __init__(self, key="e2b_test_key_0123456789abcdef", port=0):
        self.key = key
        self.sandboxes = []     # listed rows (the token check's answer)
        self.live = {}          # sandboxID -> {"container", "template", "state", "token"}
        super().__init__(port)

    def stop(self):
        super().stop()
        for sb in list(self.live.values()):
            docker("rm", "-f", sb["container"])
        self.live.clear()

    def answer(self, method, path, query, headers, body):
        sid = headers.get("e2b-sandbox-id")
        if sid is not None and (path == "/files" or path.startswith("/process.Process/")):
            return self.envd(sid, method, path, query, headers)
        if headers.get("x-api-key") != self.key:
            return 401, {"code": 401, "message": "Invalid API key"}
        if method == "GET" and path == "/v2/sandboxes":
            try:
                limit = int((query.get("limit") or ["100"])[0])
            except ValueError:
                return 400, {"code": 400, "message": "invalid limit"}
            return 200, self.sandboxes[:max(limit, 0)]
        # 2.56 creates and connects through /v2; the older routes answer the same
        parts = path.strip("/").split("/")
        if parts[0] == "v2":
            parts = parts[1:]
        if method == "POST" and parts == ["sandboxes"]:
            return self.create(body if isinstance(body, dict) else {})
        if len(parts) >= 2 and parts[0] == "sandboxes":
            sb = self.live.get(parts[1])
            if sb is None:
                return 404, {"code": 404, "message": "sandbox \"%s\" not found" % parts[1]}
            if method == "DELETE" and len(parts) == 2:
                docker("rm", "-f", sb["container"])
                del self.live[parts[1]]
                return 204, b""
            if method == "POST" and len(parts) == 3 and parts[2] == "pause":
                if sb["state"] == "paused":
                    return 409, {"code": 409, "message": "sandbox \"%s\" is already paused" % parts[1]}
                docker("pause", sb["container"])
                sb["state"] = "paused"
                return 204, b""
            if method == "POST" and len(parts) == 3 and parts[2] in ("resume", "connect"):
                was = sb["state"]
                if was == "paused":
                    docker("unpause", sb["container"])
                    sb["state"] = "running"
                return (201 if was == "paused" else 200), self.row(parts[1], sb)
        return 404, {"code": 404, "message": "Not found"}

    def create(self, body):
        template = body.get("templateID")
        if not isinstance(template, str) or not template:
            return 400, {"code": 400, "message": "templateID is required"}
        image = TEMPLATES.get(template, template)
        if docker("image", "inspect", image).returncode != 0:
            return 404, {"code": 404, "message": "template '%s' not found" % template}
        envs = []
        for k, v in (body.get("envVars") or {}).items():
            envs += ["-e", "%s=%s" % (k, v)]
        r = docker("run", "-d", "--network", "none", "--label", LABEL, *envs, "--entrypoint", "sleep", image,
                   "infinity")
        if r.returncode != 0:
            return 500, {"code": 500, "message": "sandbox did not start: %s" % r.stderr.decode()[-200:]}
        sid = "i" + uuid.uuid4().hex[:19]
        sb = {"container": r.stdout.decode().strip(), "template": template, "state": "running",
              "token": "ea_" + uuid.uuid4().hex}
        self.live[sid] = sb
        return 201, self.row(sid, sb)

    def row(self, sid, sb):
        return {"templateID": sb["template"], "sandboxID": sid, "clientID": "6532622b", "alias": sb["template"],
                "envdVersion": ENVD_VERSION, "envdAccessToken": sb["token"], "domain": None}

    # ---- envd ----

    def envd(self, sid, method, path, query, headers):
        sb = self.live.get(sid)
        if sb is None or sb["state"] != "running":
            return 502, {"code": 502, "message": "The sandbox %s was not found or is paused" % sid}
        if headers.get("x-access-token") != sb["token"]:
            return 401, {"code": 401, "message": "invalid access token"}
        if path == "/process.Process/Start" and method == "POST":
            return self.start(sb, headers)
        p = (query.get("path") or [""])[0]
        if not p:
            return 400, {"code": 400, "message": "path is required"}
        if not p.startswith("/"):
            p = "/home/user/" + p
        if method == "GET":
            r = docker("exec", sb["container"], "cat", "--", p)
            if r.returncode != 0:
                return 404, {"code": 404, "message": "path '%s' does not exist" % p}
            return 200, r.stdout, {"Content-Type": "application/octet-stream"}
        if method == "POST":
            data = self.upload(headers)
            if data is None:
                return 400, {"code": 400, "message": "no file in the request"}
            r = docker("exec", "-i", sb["container"], "sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh",
                       p, data=data)
            if r.returncode != 0:
                return 500, {"code": 500, "message": "write %s: %s" % (p, r.stderr.decode()[-200:])}
            return 200, [{"name": posixpath.basename(p), "type": "file", "path": p}]
        return 404, {"code": 404, "message": "Not found"}

    def upload(self, headers):
        ctype = headers.get("content-type", "")
        if ctype.startswith("application/octet-stream"):
            return self.raw
        if ctype.startswith("multipart/form-data"):
            msg = email.parser.BytesParser().parsebytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + self.raw)
            for part in msg.get_payload() if msg.is_multipart() else []:
                return part.get_payload(decode=True)
        return None

    def start(self, sb, headers):
        if not headers.get("content-type", "").startswith("application/connect+json"):
            return 415, {"code": "unimplemented", "message": "this fake speaks the connect JSON codec only"}
        raw = self.raw
        if len(raw) < 5:
            return 200, envelope({"error": {"code": "invalid_argument", "message": "no request message"}}, 2), STREAM
        flags, n = struct.unpack(">BI", raw[:5])
        try:
            req = json.loads(raw[5:5 + n])
            proc = req["process"]
            argv = [proc["cmd"]] + list(proc.get("args") or [])
        except (ValueError, KeyError, TypeError):
            return 200, envelope({"error": {"code": "invalid_argument", "message": "bad StartRequest"}}, 2), STREAM
        cmd = ["exec"]
        for k, v in (proc.get("envs") or {}).items():
            cmd += ["-e", "%s=%s" % (k, v)]
        if proc.get("cwd"):
            cmd += ["-w", proc["cwd"]]
        try:
            r = docker(*cmd, sb["container"], *argv, timeout=120)
        except subprocess.TimeoutExpired:
            return 200, envelope({"error": {"code": "deadline_exceeded", "message": "timed out"}}, 2), STREAM
        out = envelope({"event": {"start": {"pid": 1000}}})
        for name, data in (("stdout", r.stdout), ("stderr", r.stderr)):
            if data:
                out += envelope({"event": {"data": {name: base64.b64encode(data).decode()}}})
        end = {"exited": True, "status": "exit status %d" % r.returncode}
        if r.returncode:  # proto3 JSON leaves a zero exitCode out
            end["exitCode"] = r.returncode
        out += envelope({"event": {"end": end}}) + envelope({}, 2)
        return 200, out, STREAM

    @staticmethod
    def sandbox(sid, template="base"):
        return {"templateID": template, "sandboxID": sid, "clientID": "6532622b", "alias": template,
                "startedAt": "2026-01-01T00:00:00Z", "endAt": "2026-01-01T00:05:00Z", "cpuCount": 2,
                "memoryMB": 512, "diskSizeMB": 512, "state": "running", "envdVersion": "0.2.0",
                "metadata": {}}


if __name__ == "__main__":
    f = FakeE2B(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print("fake E2B API on %s (key %s)" % (f.url, f.key), flush=True)
    try:
        f.thread.join()
    except KeyboardInterrupt:
        f.stop()
