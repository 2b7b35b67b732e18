"""A FAKE of Prime Intellect's sandbox API and its sandbox gateway, for tests only. Loopback only.

Its sandboxes are real enough to run a command: each is a Docker container
(`docker run -d`, labelled denv-fake-prime) of the sandbox's docker_image,
with no network when the create's network_allowlist is empty (deny all),
and a checkpoint is a `docker commit` of one. Shapes are those of the
prime-sandboxes Python SDK 0.5.1 (prime_sandboxes/sandbox.py SandboxClient,
models.py, core/client.py, rpc_command_session.py and
_proto/command_session/command_session_pb2.py). The REST API, under
{base}/api/v1, the key as a bearer token (core/client.py); errors are
FastAPI's {detail}, a 401 raising UnauthorizedError:

  GET    /sandbox?page=P&per_page=N   200 {sandboxes, total, page, perPage, hasNext}  (the token check)
  POST   /sandbox {name, docker_image | checkpoint_id, cpu_cores, memory_gb, disk_size_gb?,
                   timeout_minutes, environment_vars?, labels, network_allowlist?, vm, idempotency_key}
                                     200 Sandbox {id, name, dockerImage, status: "PENDING", ...}
  GET    /sandbox/{id}               200 Sandbox ("RUNNING" once `polls` GETs have seen it pending)
  POST   /sandbox/status:batchGet {sandbox_ids}  200 {statuses: [{sandbox_id, status, ...}], errors}
  GET    /sandbox/{id}/error-context 200 {status, errorType, errorMessage}
  POST   /sandbox/{id}/auth          200 {gateway_url, user_ns, job_id, token, expires_at}
  DELETE /sandbox/{id}               200 {success, message}
  POST   /sandbox/{id}/checkpoints   200 SandboxCheckpoint {id, sandbox_id, state: "PENDING", ...}
  GET    /sandbox/checkpoints/{cid}  200 SandboxCheckpoint ("DURABLE" after `polls` GETs)
  POST   /sandbox/checkpoints:batchGet {checkpoint_ids}  200 {checkpoints, errors}

and the gateway, at {gateway_url}/{user_ns}/{job_id}/ with the token from
/auth as a bearer token (sandbox.py _execute_command_connect_rpc,
upload_bytes, download_file, read_file):

  POST command_session.CommandSession/Start   Connect server stream: one enveloped
       StartRequest {command: {cmd, args, envs, cwd?}}, answered by StartResponse
       {event: {start: {pid}}}, {event: {data: {stdout|stderr}}}, {event: {end: {exit_code, exited, status}}},
       then the end envelope (flag 2) {} or {error: {code, message}}. Both codecs:
       application/connect+proto (the SDK's) and application/connect+json (denv-cp's).
  POST upload?path=P&sandbox_id=ID   multipart part "file": 200 {success, path, size, timestamp}
  GET  download?path=P&sandbox_id=ID 200 the bytes; 404 {detail}
  GET  read-file?path=P              200 {content, size}

Here gateway_url is this server's own /gw. Knobs: `key` (the one accepted),
`sandboxes` (list rows), `polls`, `start_error` (a new sandbox ends in ERROR
with it as errorMessage), and FakeAPI's `plan` and `delay`. Run it:
python3 t/fakes/fake_prime.py [port].
"""
import datetime
import json
import os
import struct
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakeapi import FakeAPI  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from prime_sandboxes._proto.command_session import command_session_pb2 as pb  # noqa: E402

LABEL = "denv-fake-prime"
CHECKPOINT_REPO = "denv-fake-prime/checkpoint"
START = "/command_session.CommandSession/Start"
USER_NS = "ns-fake"


def docker(*args, data=None, timeout=120):
    return subprocess.run(["docker"] + list(args), input=data, capture_output=True, timeout=timeout)


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def envelope(data, flags=0):
    return struct.pack(">BI", flags, len(data)) + data


class FakePrime(FakeAPI):
    def __init__(self, key="pit_test_key_0123456789abcdef", port=0):
        self.key = key
        self.sandboxes = []     # listed rows (the token check's answer)
        self.live = {}          # id -> {"container", "image", "status", "polls", "env", "labels", "token", ...}
        self.checkpoints = {}   # id -> {"image", "sandbox_id", "state", "polls", "docker_image"}
        self.polls = 1
        self.start_error = None
        super().__init__(port)
        self.gateway = self.url + "/gw"

    def stop(self):
        super().stop()
        for sb in list(self.live.values()):
            docker("rm", "-f", sb["container"])
        self.live.clear()
        for cp in self.checkpoints.values():
            docker("rmi", "-f", cp["image"])
        self.checkpoints.clear()

    @staticmethod
    def error(status, detail):
        return status, {"detail": detail}

    def not_found(self, path):
        return self.error(404, "Not Found")

    def answer(self, method, path, query, headers, body):
        if path.startswith("/gw/"):
            return self.gateway_answer(method, path[len("/gw/"):], query, headers, body)
        if not path.startswith("/api/v1/"):
            return self.not_found(path)
        if headers.get("authorization") != "Bearer " + self.key:
            return self.error(401, "Invalid API key")
        parts = path[len("/api/v1/"):].strip("/").split("/")
        body = body if isinstance(body, dict) else {}
        if parts[0] != "sandbox":
            return self.not_found(path)
        if len(parts) == 1:
            if method == "GET":
                return self.list(query)
            if method == "POST":
                return self.create(body)
        if parts[1:] == ["status:batchGet"] and method == "POST":
            ids = body.get("sandbox_ids") or []
            return 200, {"statuses": [self.status_of(i, self.live[i]) for i in ids if i in self.live],
                         "errors": [{"sandbox_id": i, "code": "NOT_FOUND", "message": "Sandbox not found"}
                                    for i in ids if i not in self.live]}
        if parts[1] in ("checkpoints", "checkpoints:batchGet"):
            return self.checkpoint_answer(method, parts[1:], body)
        sb = self.live.get(parts[1])
        if sb is None:
            return self.error(404, "Sandbox %s not found" % parts[1])
        sid, rest = parts[1], parts[2:]
        if method == "GET" and not rest:
            self.advance(sb)
            return 200, self.row(sid, sb)
        if method == "DELETE" and not rest:
            docker("rm", "-f", sb["container"])
            del self.live[sid]
            return 200, {"success": True, "message": "Sandbox %s deleted" % sid}
        if method == "GET" and rest == ["error-context"]:
            return 200, {"status": sb["status"], "errorType": sb.get("error_type"),
                         "errorMessage": sb.get("error_message")}
        if method == "POST" and rest == ["auth"]:
            return 200, {"gateway_url": self.gateway, "user_ns": USER_NS, "job_id": sid, "token": sb["token"],
                         "expires_at": (datetime.datetime.now(datetime.timezone.utc) +
                                        datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")}
        if method == "POST" and rest == ["checkpoints"]:
            return self.checkpoint(sid, sb)
        return self.not_found(path)

    def list(self, query):
        try:
            per_page = int((query.get("per_page") or ["50"])[0])
            page = int((query.get("page") or ["1"])[0])
        except ValueError:
            return self.error(422, "page and per_page must be integers")
        rows = self.sandboxes[(page - 1) * per_page:page * per_page]
        return 200, {"sandboxes": rows, "total": len(self.sandboxes), "page": page, "perPage": per_page,
                     "hasNext": page * per_page < len(self.sandboxes)}

    def create(self, body):
        name = body.get("name")
        if not isinstance(name, str) or not name:
            return self.error(422, "name is required")
        if body.get("checkpoint_id"):
            cp = self.checkpoints.get(body["checkpoint_id"])
            if cp is None or cp["state"] != "DURABLE":
                return self.error(404, "Checkpoint %s not found or not durable" % body["checkpoint_id"])
            image, shown = cp["image"], cp["docker_image"]
        else:
            image = shown = body.get("docker_image")
            if not isinstance(image, str) or not image:
                return self.error(422, "docker_image is required unless checkpoint_id is set")
            if docker("image", "inspect", image).returncode != 0:
                return self.error(400, "Image %s could not be pulled" % image)
        env = body.get("environment_vars") or {}
        args = []
        for k, v in env.items():
            args += ["-e", "%s=%s" % (k, v)]
        if body.get("network_allowlist") == []:
            args += ["--network", "none"]   # an empty allowlist: no destination allowed
        r = docker("run", "-d", "--label", LABEL, *args, "--entrypoint", "sleep", image, "infinity")
        if r.returncode != 0:
            return self.error(500, "sandbox did not start: %s" % r.stderr.decode()[-200:])
        sid = uuid.uuid4().hex[:24]
        sb = {"container": r.stdout.decode().strip(), "image": shown, "name": name, "status": "PENDING",
              "polls": self.polls, "env": env, "labels": body.get("labels") or [], "token": "gw_" + uuid.uuid4().hex,
              "created": now(), "error": self.start_error, "allowlist": body.get("network_allowlist"),
              "checkpoint_id": body.get("checkpoint_id")}
        self.live[sid] = sb
        return 200, self.row(sid, sb)

    @staticmethod
    def advance(sb):
        if sb["status"] == "PENDING":
            sb["polls"] -= 1
            if sb["polls"] < 0:
                if sb.get("error"):
                    sb.update(status="ERROR", error_type="SANDBOX_START_FAILED", error_message=sb["error"])
                else:
                    sb["status"] = "RUNNING"

    def status_of(self, sid, sb):
        self.advance(sb)
        return {"sandbox_id": sid, "status": sb["status"], "error_type": sb.get("error_type"),
                "error_message": sb.get("error_message"), "pending_image_build_id": None}

    @staticmethod
    def row(sid, sb):
        return {"id": sid, "name": sb["name"], "dockerImage": sb["image"], "startCommand": None, "cpuCores": 1.0,
                "memoryGB": 1.0, "diskSizeGB": 5.0, "diskMountPath": "/sandbox-workspace", "gpuCount": 0,
                "gpuType": None, "vm": True, "networkAllowlist": sb["allowlist"], "networkDenylist": None,
                "status": sb["status"], "timeoutMinutes": 60, "environmentVars": sb["env"], "labels": sb["labels"],
                "createdAt": sb["created"], "updatedAt": now(), "startedAt": None, "terminatedAt": None,
                "errorType": sb.get("error_type"), "errorMessage": sb.get("error_message"),
                "userId": "user-fake", "teamId": None, "region": "us-east"}

    # ---- checkpoints ----

    def checkpoint(self, sid, sb):
        if sb["status"] != "RUNNING":
            return self.error(409, "Sandbox %s is %s, not RUNNING" % (sid, sb["status"]))
        cid = "ckpt_" + uuid.uuid4().hex[:20]
        image = "%s:%s" % (CHECKPOINT_REPO, cid.lower())
        r = docker("commit", sb["container"], image)
        if r.returncode != 0:
            return self.error(500, "checkpoint failed: %s" % r.stderr.decode()[-200:])
        self.checkpoints[cid] = {"image": image, "sandbox_id": sid, "state": "PENDING", "polls": self.polls,
                                 "docker_image": sb["image"], "created": now()}
        return 200, self.checkpoint_row(cid)

    def checkpoint_row(self, cid):
        cp = self.checkpoints[cid]
        return {"id": cid, "sandbox_id": cp["sandbox_id"], "parent_id": None, "team_id": None, "state": cp["state"],
                "depth": 1, "docker_image": cp["docker_image"], "disk_size_bytes": 5 << 30, "stored_bytes": 1 << 20,
                "occupied_bytes": 1 << 20, "error": None, "created_at": cp["created"], "updated_at": now()}

    def checkpoint_seen(self, cid):
        cp = self.checkpoints[cid]
        if cp["state"] == "PENDING":
            cp["polls"] -= 1
            if cp["polls"] < 0:
                cp["state"] = "DURABLE"
        return self.checkpoint_row(cid)

    def checkpoint_answer(self, method, parts, body):
        if parts == ["checkpoints:batchGet"] and method == "POST":
            ids = body.get("checkpoint_ids") or []
            return 200, {"checkpoints": [self.checkpoint_seen(i) for i in ids if i in self.checkpoints],
                         "errors": [{"checkpoint_id": i, "code": "NOT_FOUND", "message": "Checkpoint not found"}
                                    for i in ids if i not in self.checkpoints]}
        if len(parts) == 2 and method == "GET":
            if parts[1] not in self.checkpoints:
                return self.error(404, "Checkpoint %s not found" % parts[1])
            return 200, self.checkpoint_seen(parts[1])
        return self.not_found("/".join(parts))

    # ---- the gateway ----

    def gateway_answer(self, method, path, query, headers, body):
        parts = path.split("/", 2)
        if len(parts) != 3 or parts[0] != USER_NS:
            return self.error(404, "Not Found")
        sb = self.live.get(parts[1])
        if sb is None:
            return 502, {"error": "sandbox_not_found", "detail": "Sandbox %s not found" % parts[1]}
        if headers.get("authorization") != "Bearer " + sb["token"]:
            return 401, {"code": "unauthenticated", "message": "invalid gateway token"}
        if sb["status"] != "RUNNING":
            return self.error(409, "Sandbox is %s" % sb["status"])
        rest = "/" + parts[2]
        if rest == START and method == "POST":
            return self.start(sb, headers)
        p = (query.get("path") or [""])[0]
        if not p:
            return self.error(422, "path is required")
        if method == "GET" and rest in ("/download", "/read-file"):
            r = docker("exec", sb["container"], "cat", "--", p)
            if r.returncode != 0:
                return self.error(404, "File not found: %s" % p)
            if rest == "/read-file":
                return 200, {"content": r.stdout.decode("utf-8", "replace"), "size": len(r.stdout)}
            return 200, r.stdout, {"Content-Type": "application/octet-stream"}
        if method == "POST" and rest == "/upload":
            data = self.multipart_file(headers)
            if data is None:
                return self.error(422, "no file in the request")
            r = docker("exec", "-i", sb["container"], "sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh",
                       p, data=data)
            if r.returncode != 0:
                return self.error(500, "write %s: %s" % (p, r.stderr.decode()[-200:]))
            return 200, {"success": True, "path": p, "size": len(data), "timestamp": now()}
        return self.error(404, "Not Found")

    def start(self, sb, headers):
        ctype = headers.get("content-type", "")
        if ctype not in ("application/connect+proto", "application/connect+json"):
            return 415, {"code": "unimplemented", "message": "content-type %r is not a Connect stream" % ctype}
        as_json = ctype.endswith("+json")
        kind = {"Content-Type": ctype}

        def end(code=None, message=""):
            doc = {"error": {"code": code, "message": message}} if code else {}
            return envelope(json.dumps(doc).encode(), 2)
        raw = self.raw
        if len(raw) < 5:
            return 200, end("invalid_argument", "no request message"), kind
        flags, n = struct.unpack(">BI", raw[:5])
        req = pb.StartRequest()
        try:
            if flags & 1 or len(raw) != 5 + n:
                raise ValueError("one uncompressed message expected")
            if as_json:
                json_format.Parse(raw[5:].decode(), req)
            else:
                req.ParseFromString(raw[5:])
        except (ValueError, json_format.ParseError, UnicodeDecodeError) as ex:
            return 200, end("invalid_argument", "bad StartRequest: %s" % ex), kind
        if not req.command.cmd:
            return 200, end("invalid_argument", "command.cmd is required"), kind
        cmd = ["exec"]
        for k, v in req.command.envs.items():
            cmd += ["-e", "%s=%s" % (k, v)]
        if req.command.HasField("cwd"):
            cmd += ["-w", req.command.cwd]
        timeout = int(headers.get("connect-timeout-ms") or 300000) / 1000.0
        try:
            r = docker(*cmd, sb["container"], req.command.cmd, *req.command.args, timeout=timeout)
        except subprocess.TimeoutExpired:
            return 200, end("deadline_exceeded", "the command ran past its deadline"), kind

        def message(ev):
            m = pb.StartResponse(event=ev)
            return envelope(json_format.MessageToJson(m, indent=None).encode() if as_json else m.SerializeToString())
        out = message(pb.CommandSessionEvent(start=pb.CommandSessionEvent.StartEvent(pid=1000)))
        for name, data in (("stdout", r.stdout), ("stderr", r.stderr)):
            if data:
                out += message(pb.CommandSessionEvent(data=pb.CommandSessionEvent.DataEvent(**{name: data})))
        out += message(pb.CommandSessionEvent(end=pb.CommandSessionEvent.EndEvent(
            exit_code=r.returncode, exited=True, status="exited")))
        return 200, out + end(), kind


if __name__ == "__main__":
    f = FakePrime(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print("fake Prime sandbox API on %s (key %s)" % (f.url, f.key), flush=True)
    try:
        f.thread.join()
    except KeyboardInterrupt:
        f.stop()
