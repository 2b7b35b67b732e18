"""A FAKE of the Daytona API, for tests only. Loopback only.

Its sandboxes are real enough to run a command: each is a Docker container
(`docker run -d --network none`, labelled denv-fake-daytona) of the image
named in the build's Dockerfile (`FROM image`), and a snapshot is a
`docker commit` of one. Shapes are those of the daytona Python SDK 0.226.1
and its generated clients daytona-api-client and daytona-toolbox-api-client
0.226.1. The main API (daytona_api_client/api/sandbox_api.py, models/
sandbox.py, create_sandbox.py, create_build_info.py,
create_sandbox_snapshot.py, toolbox_proxy_url.py; the key as a bearer token,
daytona/_sync/daytona.py; errors read from {message, code?, source?},
daytona/_utils/errors.py, a 401 raising DaytonaAuthenticationError):

  GET    /api/sandbox?limit=N   200 {items: [...], nextCursor: null}  (the token check)
  POST   /api/sandbox {buildInfo: {dockerfileContent: "FROM img\\n"} | snapshot, env?, labels?}
                                200 Sandbox {id, state: "creating", toolboxProxyUrl, ...}
  GET    /api/sandbox/{id}      200 Sandbox (state "started" once created)
  DELETE /api/sandbox/{id}      200 Sandbox {state: "destroyed"}
  POST   /api/sandbox/{id}/snapshot {name}   200 Sandbox {state: "snapshotting"}
  GET    /api/sandbox/{id}/toolbox-proxy-url 200 {url}
  401 {statusCode: 401, message: "Invalid API key", error: "Unauthorized"}
  404 {statusCode: 404, message, error: "Not Found"}

and the toolbox, reached at {toolboxProxyUrl}/{sandboxId}/... with the same
bearer key (daytona/internal/toolbox_api_client_proxy.py;
daytona_toolbox_api_client/api/process_api.py, file_system_api.py,
models/execute_request.py, execute_response.py):

  POST /process/execute {command, cwd?, envs?, timeout?}  200 {exitCode, result}
       (result is stdout and stderr together, as Daytona answers it)
  POST /files/upload-v2?path=P  multipart/form-data, the bytes in part "file":
                                200 UploadedFile {name, path, type}
  GET  /files/download?path=P   200 the bytes; 404 {statusCode, message}

Here toolboxProxyUrl is this server's own /api/toolbox. Knobs: `key` (the
one accepted), `sandboxes` (list items answered), `polls` (GETs a new
sandbox answers "creating" before "started"), `start_error` (when set, a
new sandbox ends in state "error" with it as errorReason), and FakeAPI's
`plan` and `delay`. Run it: python3 t/fakes/fake_daytona.py [port].
"""
import os
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakeapi import FakeAPI  # noqa: E402

LABEL = "denv-fake-daytona"
SNAP_REPO = "denv-fake-daytona/snapshot"


def docker(*args, data=None, timeout=120):
    return subprocess.run(["docker"] + list(args), input=data, capture_output=True, timeout=timeout)


class FakeDaytona(FakeAPI):
    base = "/api"

    def __init__(self, key="dtn_test_key_0123456789abcdef", port=0):
        self.key = key
        self.sandboxes = []     # listed rows (the token check's answer)
        self.live = {}          # id -> {"container", "image", "state", "polls", "env", "labels"}
        self.snapshots = {}     # Daytona snapshot name -> committed image
        self.polls = 1
        self.start_error = None
        super().__init__(port)

    def stop(self):
        super().stop()
        for sb in list(self.live.values()):
            docker("rm", "-f", sb["container"])
        self.live.clear()
        for image in self.snapshots.values():
            docker("rmi", "-f", image)
        self.snapshots.clear()

    @staticmethod
    def error(status, message):
        names = {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 409: "Conflict", 500: "Internal Server Error"}
        return status, {"statusCode": status, "message": message, "error": names.get(status, "Error")}

    def not_found(self, path):
        return self.error(404, "Cannot GET %s" % path)

    def answer(self, method, path, query, headers, body):
        if headers.get("authorization") != "Bearer " + self.key:
            return self.error(401, "Invalid API key")
        parts = path.strip("/").split("/")
        if parts[0] == "toolbox" and len(parts) >= 3:
            return self.toolbox(parts[1], method, "/" + "/".join(parts[2:]), query, headers, body)
        if parts[0] != "sandbox":
            return self.not_found(path)
        if method == "GET" and len(parts) == 1:
            try:
                limit = int((query.get("limit") or ["100"])[0])
            except ValueError:
                return self.error(400, "limit must be an integer")
            return 200, {"items": self.sandboxes[:max(limit, 0)], "nextCursor": None}
        if method == "POST" and len(parts) == 1:
            return self.create(body if isinstance(body, dict) else {})
        sb = self.live.get(parts[1]) if len(parts) >= 2 else None
        if sb is None:
            return self.error(404, "Sandbox with ID or name %s not found" % parts[1])
        if method == "GET" and len(parts) == 2:
            if sb["state"] in ("creating", "snapshotting"):
                sb["polls"] -= 1
                if sb["polls"] < 0:
                    sb["state"] = "error" if sb.get("error") else "started"
            return 200, self.row(parts[1], sb)
        if method == "GET" and parts[2:] == ["toolbox-proxy-url"]:
            return 200, {"url": self.url + "/toolbox"}
        if method == "DELETE" and len(parts) == 2:
            docker("rm", "-f", sb["container"])
            del self.live[parts[1]]
            sb["state"] = "destroyed"
            return 200, self.row(parts[1], sb)
        if method == "POST" and parts[2:] == ["snapshot"]:
            return self.snapshot(parts[1], sb, body if isinstance(body, dict) else {})
        return self.not_found(path)

    def create(self, body):
        image = None
        if isinstance(body.get("snapshot"), str) and body["snapshot"]:
            image = self.snapshots.get(body["snapshot"])
            if image is None:
                return self.error(404, "Snapshot %s not found" % body["snapshot"])
        else:
            lines = ((body.get("buildInfo") or {}).get("dockerfileContent") or "").splitlines()
            froms = [ln.split(None, 1)[1].strip() for ln in lines if ln.upper().startswith("FROM ") and
                     len(ln.split(None, 1)) == 2]
            if not froms:
                return self.error(400, "buildInfo.dockerfileContent or snapshot is required")
            image = froms[0]
            if docker("image", "inspect", image).returncode != 0:
                return self.error(400, "Failed to pull image %s: not found" % image)
        env = body.get("env") or {}
        args = []
        for k, v in env.items():
            args += ["-e", "%s=%s" % (k, v)]
        r = docker("run", "-d", "--network", "none", "--label", LABEL, *args, "--entrypoint", "sleep", image,
                   "infinity")
        if r.returncode != 0:
            return self.error(500, "sandbox did not start: %s" % r.stderr.decode()[-200:])
        sid = str(uuid.uuid4())
        sb = {"container": r.stdout.decode().strip(), "image": image, "state": "creating", "polls": self.polls,
              "env": env, "labels": body.get("labels") or {}, "snapshot": body.get("snapshot"),
              "error": self.start_error}
        self.live[sid] = sb
        return 200, self.row(sid, sb)

    def snapshot(self, sid, sb, body):
        name = body.get("name")
        if not isinstance(name, str) or not name:
            return self.error(400, "name is required")
        if name in self.snapshots:
            return self.error(409, "Snapshot with name %s already exists" % name)
        image = "%s:%s" % (SNAP_REPO, uuid.uuid4().hex[:16])
        r = docker("commit", sb["container"], image)
        if r.returncode != 0:
            return self.error(500, "snapshot failed: %s" % r.stderr.decode()[-200:])
        self.snapshots[name] = image
        sb["state"] = "snapshotting"
        sb["polls"] = self.polls
        return 200, self.row(sid, sb)

    def row(self, sid, sb):
        return {"id": sid, "organizationId": "org-fake", "name": sid, "snapshot": sb.get("snapshot"),
                "user": "daytona", "env": sb["env"], "labels": sb["labels"], "public": False,
                "networkBlockAll": True, "kvm": False, "target": "us", "cpu": 1, "gpu": 0, "memory": 1,
                "disk": 3, "state": sb["state"], "desiredState": "started",
                "errorReason": sb.get("error") if sb["state"] == "error" else None,
                "toolboxProxyUrl": self.url + "/toolbox"}

    # ---- the toolbox ----

    def toolbox(self, sid, method, path, query, headers, body):
        sb = self.live.get(sid)
        if sb is None:
            return self.error(404, "Sandbox with ID or name %s not found" % sid)
        if sb["state"] != "started":
            return self.error(409, "Sandbox is not started (state %s)" % sb["state"])
        if method == "POST" and path == "/process/execute":
            return self.execute(sb, body if isinstance(body, dict) else {})
        p = (query.get("path") or [""])[0]
        if not p:
            return self.error(400, "path is required")
        if method == "GET" and path == "/files/download":
            r = docker("exec", sb["container"], "cat", "--", p)
            if r.returncode != 0:
                return self.error(404, "file not found: %s" % p)
            return 200, r.stdout, {"Content-Type": "application/octet-stream"}
        if method == "POST" and path == "/files/upload-v2":
            data = self.multipart_file(headers)
            if data is None:
                return self.error(400, "no file in the request")
            r = docker("exec", "-i", sb["container"], "sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh",
                       p, data=data)
            if r.returncode != 0:
                return self.error(500, "write %s: %s" % (p, r.stderr.decode()[-200:]))
            return 200, {"name": p.rsplit("/", 1)[-1], "path": p, "type": "file"}
        return self.not_found(path)

    def execute(self, sb, req):
        command = req.get("command")
        if not isinstance(command, str) or not command:
            return self.error(400, "command is required")
        args = ["exec"]
        for k, v in (req.get("envs") or {}).items():
            args += ["-e", "%s=%s" % (k, v)]
        if req.get("cwd"):
            args += ["-w", req["cwd"]]
        timeout = req.get("timeout") or 10  # Daytona's default, in seconds
        try:
            r = docker(*args, sb["container"], "sh", "-c", command, timeout=timeout)
        except subprocess.TimeoutExpired:
            return self.error(408, "command timed out after %d seconds" % timeout)
        return 200, {"exitCode": r.returncode, "result": (r.stdout + r.stderr).decode("utf-8", "replace")}


if __name__ == "__main__":
    f = FakeDaytona(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print("fake Daytona API on %s (key %s)" % (f.url, f.key), flush=True)
    try:
        f.thread.join()
    except KeyboardInterrupt:
        f.stop()
