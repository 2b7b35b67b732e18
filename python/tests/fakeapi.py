"""A FAKE of the denv REST API (../shared/spec/api.md) for the unit tests.

Not denv: a Python http.server on 127.0.0.1 that answers the routes the client
uses, records every request, and can be told to fail or stall a route. Two
backends stand in for a host:

- ``MemoryBackend``: files in a dict, exec answered by a Python function.
- ``DockerBackend``: one real container per environment (``docker run``,
  ``docker exec``, ``docker cp``; snapshot is ``docker commit``), so the real
  Harbor, Inspect and OpenEnv can be driven through the adapters before the
  real sidecar exists. Containers are labelled and removed by ``stop()``.
"""

from __future__ import annotations

import io
import base64
import itertools
import json
import re
import subprocess
import tarfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import yaml

KEY = "dak_fake_0123456789"
_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}"


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# ---- backends ----

class MemoryBackend:
    """Files in a dict per environment; exec through ``exec_fn``.

    ``exec_fn`` answers ``(exit_code, stdout, stderr)``, or with a fourth item
    ``truncated`` (what denvd says when it cut a stream at 1 MiB). ``meta``
    keeps each uploaded file's (mode, uid, gid) and ``get`` serves the mode.
    """

    def __init__(self) -> None:
        self.files: dict[str, dict[str, bytes]] = {}
        self.meta: dict[str, dict[str, tuple[int, int, int]]] = {}
        self.exec_fn: Callable[[str, str, list[str], int], tuple[Any, ...]] = (
            lambda env, svc, cmd, t: (0, json.dumps(cmd), "")
        )

    def create(self, env: dict[str, Any], spec: dict[str, Any]) -> dict[str, str]:
        self.files[env["ID"]] = {}
        # denv publishes ports with either egress (deny: through denvd's ingress proxy).
        return {"main": "127.0.0.1:18000"} if spec.get("ports") else {}

    def fork(self, src_env: str, new_env: dict[str, Any], spec: dict[str, Any]) -> dict[str, str]:
        self.files[new_env["ID"]] = dict(self.files.get(src_env, {}))
        return {"main": "127.0.0.1:18001"} if spec.get("ports") else {}

    def snapshot(self, env_id: str, version: str) -> None:
        pass

    def destroy(self, env_id: str) -> None:
        self.files.pop(env_id, None)

    def exec(self, env_id: str, service: str, cmd: list[str], timeout: int) -> tuple[Any, ...]:
        return self.exec_fn(env_id, service, cmd, timeout)

    def put(self, env_id: str, service: str, path: str, data: bytes) -> None:
        fs = self.files[env_id]
        meta = self.meta.setdefault(env_id, {})
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            for m in tf:
                full = path.rstrip("/") + "/" + m.name
                if m.isfile():
                    f = tf.extractfile(m)
                    fs[full] = f.read() if f else b""
                    meta[full] = (m.mode, m.uid, m.gid)

    def get(self, env_id: str, service: str, path: str) -> bytes:
        fs = self.files[env_id]
        buf = io.BytesIO()
        base = path.rstrip("/").rsplit("/", 1)[-1]
        with tarfile.open(fileobj=buf, mode="w") as tf:
            if path in fs:
                info = tarfile.TarInfo(base)
                info.size = len(fs[path])
                info.mode = self.meta.get(env_id, {}).get(path, (0o644, 0, 0))[0]
                tf.addfile(info, io.BytesIO(fs[path]))
            else:
                below = sorted(p for p in fs if p.startswith(path.rstrip("/") + "/"))
                if not below:
                    # denvd's words for what docker cp says (src/sidecar/files.c)
                    raise ApiError(502, f"env.get: docker cp {path}: Error response from daemon: "
                                        f"Could not find the file {path} in container denv-fake")
                d = tarfile.TarInfo(base)
                d.type = tarfile.DIRTYPE
                d.mode = 0o755
                tf.addfile(d)
                for p in below:
                    info = tarfile.TarInfo(base + p[len(path.rstrip("/")):])
                    info.size = len(fs[p])
                    tf.addfile(info, io.BytesIO(fs[p]))
        return buf.getvalue()


class DockerBackend:
    """One container per environment, driven with the docker CLI."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.containers: dict[str, str] = {}
        self.images: dict[str, str] = {}  # version -> committed image
        self.specs: dict[str, dict[str, Any]] = {}

    @staticmethod
    def _docker(args: list[str], data: bytes | None = None, timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["docker", *args], input=data, capture_output=True, timeout=timeout)

    def _run(self, env_id: str, image: str, spec: dict[str, Any]) -> dict[str, str]:
        args = ["run", "-d", "--label", f"denv-fake={self.label}", "--name", f"denv-fake-{self.label}-{env_id}"]
        for k, v in (spec.get("env") or {}).items():
            args += ["-e", f"{k}={v}"]
        allow = spec.get("egress") == "allow"
        if not allow:
            args += ["--network", "none"]
        ports = [str(p) for p in spec.get("ports") or []]
        if allow:
            for p in ports:
                args += ["-p", f"127.0.0.1::{p}"]
        args.append(image)
        args += list(spec.get("cmd") or ["sleep", "infinity"])
        r = self._docker(args)
        if r.returncode != 0:
            raise ApiError(502, "docker run: " + r.stderr.decode(errors="replace").strip())
        cid = r.stdout.decode().strip()
        self.containers[env_id] = cid
        self.specs[env_id] = spec
        for v in spec.get("volumes") or []:
            self._docker(["exec", cid, "mkdir", "-p", v])
        endpoints: dict[str, str] = {}
        if allow and ports:
            r = self._docker(["port", cid, f"{ports[0]}/tcp"])
            line = r.stdout.decode().strip().splitlines()
            if line:
                endpoints["main"] = line[0].replace("0.0.0.0", "127.0.0.1")
        return endpoints

    def create(self, env: dict[str, Any], spec: dict[str, Any]) -> dict[str, str]:
        return self._run(env["ID"], spec["image"], spec)

    def fork(self, src_env: str, new_env: dict[str, Any], spec: dict[str, Any]) -> dict[str, str]:
        image = self.images.get(spec["version"])
        if not image:
            raise ApiError(502, f"no snapshot image for {spec['version']}")
        return self._run(new_env["ID"], image, spec)

    def snapshot(self, env_id: str, version: str) -> None:
        tag = f"denv-fake/{self.label}:{version.lower()}"
        r = self._docker(["commit", self.containers[env_id], tag])
        if r.returncode != 0:
            raise ApiError(502, "docker commit: " + r.stderr.decode(errors="replace").strip())
        self.images[version] = tag

    def destroy(self, env_id: str) -> None:
        cid = self.containers.pop(env_id, None)
        if cid:
            self._docker(["rm", "-f", cid])

    def exec(self, env_id: str, service: str, cmd: list[str], timeout: int) -> tuple[int, str, str]:
        try:
            r = self._docker(["exec", self.containers[env_id], *cmd], timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ApiError(504, f"exec timed out after {timeout} s") from None
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    def put(self, env_id: str, service: str, path: str, data: bytes) -> None:
        cid = self.containers[env_id]
        self._docker(["exec", cid, "mkdir", "-p", path])
        r = self._docker(["cp", "-", f"{cid}:{path}"], data=data)
        if r.returncode != 0:
            raise ApiError(502, "env.put: " + r.stderr.decode(errors="replace").strip())

    def get(self, env_id: str, service: str, path: str) -> bytes:
        r = self._docker(["cp", f"{self.containers[env_id]}:{path}", "-"])
        if r.returncode != 0:
            raise ApiError(502, "env.get: " + r.stderr.decode(errors="replace").strip())
        return r.stdout

    def cleanup(self) -> None:
        r = self._docker(["ps", "-aq", "--filter", f"label=denv-fake={self.label}"])
        ids = r.stdout.decode().split()
        if ids:
            self._docker(["rm", "-f", *ids])
        for tag in set(self.images.values()):
            self._docker(["rmi", "-f", tag])


# ---- the API ----

class FakeDenv:
    """The fake control plane. ``url`` and ``KEY`` are what a Client needs."""

    def __init__(self, backend: Any | None = None, key: str = KEY) -> None:
        self.key = key
        self.backend = backend or MemoryBackend()
        self.requests: list[Recorded] = []
        self.envs: dict[str, dict[str, Any]] = {}
        self.deps: dict[str, dict[str, Any]] = {}
        self.phases: dict[str, list[dict[str, Any]]] = {}
        self.polls: dict[str, int] = {}
        self.projects: set[str] = set()
        self.batches: dict[str, dict[str, Any]] = {}
        self.running_polls = 1  # GETs of a deployment that still answer "running"
        # (METHOD, regex of path) -> (status, message) or seconds to stall
        self.fail: dict[tuple[str, str], tuple[int, str]] = {}
        self.stall: dict[tuple[str, str], float] = {}
        self.raw_fail: dict[tuple[str, str], tuple[int, bytes, str]] = {}
        self.verdict: dict[str, Any] = {"reward": 1.0, "source": "reward.txt", "exit_code": 0,
                                        "refused": [], "missing": [], "agent_frozen": True, "took_ms": 5}
        self.verify_status = "succeeded"
        self.snapshot_status = "succeeded"
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def _handle(self) -> None:
                fake._dispatch(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up (timeout tests) is not an error here

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FakeDenv":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> "FakeDenv":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if hasattr(self.backend, "cleanup"):
            self.backend.cleanup()

    def calls(self, method: str | None = None, path_re: str | None = None) -> list[Recorded]:
        return [r for r in self.requests
                if (method is None or r.method == method) and (path_re is None or re.fullmatch(path_re, r.path))]

    # ---- plumbing ----

    def _dispatch(self, h: BaseHTTPRequestHandler) -> None:
        u = urllib.parse.urlsplit(h.path)
        path = u.path
        query = dict(urllib.parse.parse_qsl(u.query))
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n) if n else b""
        ctype = h.headers.get("Content-Type", "")
        body: Any = raw
        if raw and "json" in ctype:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
        self.requests.append(Recorded(h.command, path, query, body, {k.lower(): v for k, v in h.headers.items()}))
        for (m, rx), secs in list(self.stall.items()):
            if m == h.command and re.fullmatch(rx, path):
                time.sleep(secs)
        for (m, rx), (st, payload, pct) in list(self.raw_fail.items()):
            if m == h.command and re.fullmatch(rx, path):
                return self._send(h, st, payload, pct)
        for (m, rx), (st, msg) in list(self.fail.items()):
            if m == h.command and re.fullmatch(rx, path):
                return self._send_json(h, st, {"error": msg})
        if h.headers.get("Authorization") != f"Bearer {self.key}":
            return self._send_json(h, 401, {"error": "invalid API key"})
        try:
            status, out = self._route(h.command, path, query, body)
        except ApiError as e:
            return self._send_json(h, e.status, {"error": e.message})
        except Exception as e:  # a bug in the fake shows up as a 500
            return self._send_json(h, 500, {"error": f"fake: {type(e).__name__}: {e}"})
        if isinstance(out, bytes):
            return self._send(h, status, out, "application/x-tar")
        return self._send_json(h, status, out)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: bytes, ctype: str) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)

    def _send_json(self, h: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
        self._send(h, status, json.dumps(doc).encode(), "application/json")

    def _env(self, env_id: str) -> dict[str, Any]:
        env = self.envs.get(env_id)
        if env is None or env["Status"] == "destroyed":
            raise ApiError(404, "environment not found")
        return env

    def _dep(self, kind: str, env_id: str, status: str = "succeeded", version: str = "",
             error: str = "", phases: list[tuple[str, Any]] | None = None) -> dict[str, Any]:
        dep = {"ID": new_id("dep"), "Kind": kind, "EnvID": env_id, "Status": status,
               "VersionID": version, "Error": error, "ProjectID": "prj_fake"}
        self.deps[dep["ID"]] = dep
        self.polls[dep["ID"]] = 0
        self.phases[dep["ID"]] = [
            {"DeploymentID": dep["ID"], "Seq": i + 1, "Name": n, "Status": "ok", "Evidence": ev, "Error": ""}
            for i, (n, ev) in enumerate(phases or [("verdict", None)])
        ]
        return dep

    def _new_env(self, name: str, parent: str = "") -> dict[str, Any]:
        env = {"ID": new_id("env"), "ProjectID": "prj_fake", "Name": name, "Stage": "fork" if parent else "alpha",
               "HostID": "hst_fake", "ParentVersionID": parent, "CurrentVersionID": "", "Status": "healthy",
               "Endpoints": {}}
        self.envs[env["ID"]] = env
        return env

    # ---- routes ----

    def _batch(self, b: dict[str, Any], q: dict[str, str]) -> tuple[int, Any]:
        """POST /v1/sandboxes/batch as denv-cp answers it: 202, every member
        pending; an image with "flaky" in it fails the odd-numbered members."""
        count = b.get("count")
        if not isinstance(count, int) or not 1 <= count <= 256:
            raise ApiError(400, "count must be 1 to 256")
        prefix = b.get("name_prefix") or f"b-{next(_ids)}-"
        one = {k: v for k, v in b.items() if k not in ("count", "name_prefix")}
        members = []
        for i in range(count):
            if "flaky" in str(b.get("image")) and i % 2:
                members.append({"name": f"{prefix}{i}", "environment": new_id("env"), "deployment": new_id("dep"),
                                "error": "fake: image pull failed"})
                continue
            _, doc = self._route("POST", "/v1/sandboxes", q, dict(one, name=f"{prefix}{i}"))
            members.append({"name": f"{prefix}{i}", "environment": doc["environment"]["ID"],
                            "deployment": doc["deployment"]["ID"]})
        bid = new_id("bat")
        self.batches[bid] = {"ID": bid, "Count": count, "NamePrefix": prefix, "members": members, "polls": 0}
        return 202, self._batch_view(bid, fresh=True)

    def _batch_view(self, bid: str, fresh: bool = False) -> dict[str, Any]:
        bt = self.batches.get(bid)
        if bt is None:
            raise ApiError(404, "batch not found")
        if not fresh:
            bt["polls"] += 1
        out = []
        for i, m in enumerate(bt["members"]):
            o = {"index": i, "name": m["name"], "environment": m["environment"], "deployment": m["deployment"]}
            env = self.envs.get(m["environment"])
            if fresh or bt["polls"] <= self.running_polls:
                o["state"] = "pending"
            elif "error" in m:
                o.update(state="failed", error=m["error"])
            elif env is None or env["Status"] == "destroyed":
                o["state"] = "destroyed"
            else:
                o.update(state="healthy", endpoints=env.get("Endpoints") or {})
            out.append(o)
        counts = {k: sum(o["state"] == k for o in out) for k in ("healthy", "failed", "pending", "destroyed")}
        return {"batch": {"ID": bid, "Count": bt["Count"], "NamePrefix": bt["NamePrefix"]}, "members": out,
                "counts": counts, "done": counts["pending"] == 0}

    def _route(self, method: str, path: str, q: dict[str, str], body: Any) -> tuple[int, Any]:
        b = body if isinstance(body, dict) else {}
        if method == "POST" and path == "/v1/sandboxes":
            if not b.get("image") and not b.get("from_version"):
                raise ApiError(400, "image or from_version is required")
            if b.get("name") and any(e["Name"] == b["name"] for e in self.envs.values()):
                raise ApiError(409, f'environment "{b["name"]}" already exists')  # as denv-cp
            if b.get("from_version"):
                src = next((e for e in self.envs.values()
                            if b["from_version"] in e.get("_versions", [])), None)
                if src is None:
                    raise ApiError(404, "version not found")
                spec = dict(src["_spec"], version=b["from_version"], egress=b.get("egress", src["_spec"].get("egress")))
                env = self._new_env(b.get("name") or f"sbx-{next(_ids)}", parent=b["from_version"])
                env["Endpoints"] = self.backend.fork(src["ID"], env, spec)
                env["_spec"] = spec
                env["CurrentVersionID"] = b["from_version"]
                env["_versions"] = []
                dep = self._dep("fork", env["ID"])
            else:
                env = self._new_env(b.get("name") or f"sbx-{next(_ids)}")
                spec = {k: b.get(k) for k in ("image", "cmd", "env", "ports", "egress")}
                spec["volumes"] = b.get("volumes") or ["/work"]
                env["Endpoints"] = self.backend.create(env, spec)
                env["_spec"] = spec
                ver = new_id("ver")
                env["CurrentVersionID"] = ver
                env["_versions"] = [ver]
                dep = self._dep("deploy", env["ID"], version=ver)
            return 201, {"environment": self._public(env), "deployment": dep}
        m = re.fullmatch(r"/v1/envs/([^/]+)/metrics", path)
        if method == "GET" and m:
            self._env(m.group(1))
            return 200, {"environment": m.group(1), "storage": "dir", "sampled_at_ms": 1,
                         "services": [{"service": "main", "status": "running", "cpu_usec": 10,
                                       "memory_bytes": 4096, "memory_limit_bytes": None, "pids": 1}],
                         "volumes": [{"name": "work", "bytes": 4096}]}
        m = re.fullmatch(r"/v1/envs/([^/]+)/logs", path)
        if method == "GET" and m:
            self._env(m.group(1))
            stamp = "2026-12-02T00:00:00.000000000Z " if q.get("timestamps") == "true" else ""
            lines = [f"{stamp}line {i}\n" for i in range(3)][-int(q.get("tail", "100")):]
            return 200, {"environment": m.group(1), "service": q.get("service", "main"),
                         "stdout": "".join(lines), "stderr": f"{stamp}err\n"}
        if method == "POST" and path == "/v1/sandboxes/batch":
            return self._batch(b, q)
        m = re.fullmatch(r"/v1/batches/([^/]+)", path)
        if method == "GET" and m:
            return 200, self._batch_view(m.group(1))
        if method == "POST" and path == "/v1/projects":
            if b.get("name") in self.projects:
                raise ApiError(409, f"project {b.get('name')} exists")
            self.projects.add(b["name"])
            return 201, {"project": {"ID": "prj_fake", "Name": b["name"]}, "environments": []}
        m = re.fullmatch(r"/v1/projects/([^/]+)/envs", path)
        if method == "GET" and m:
            # every environment of the fake is in one project: enough for listings
            return 200, {"environments": [self._public(e) for e in self.envs.values()]}
        m = re.fullmatch(r"/v1/projects/([^/]+)/deploy", path)
        if method == "POST" and m:
            if m.group(1) not in self.projects:
                raise ApiError(404, "project not found")
            compose = yaml.safe_load(b.get("compose") or "") or {}
            services = compose.get("services") or {}
            if "main" not in services:
                raise ApiError(400, "compose: the fake deploys service main only")
            svc = services["main"]
            cmd = svc.get("command")
            spec = {"image": svc.get("image"), "cmd": cmd if isinstance(cmd, list) else (cmd.split() if cmd else None),
                    "env": svc.get("environment") or {}, "egress": "deny", "volumes": ["/work"]}
            env = self._new_env(b.get("env") or "alpha")
            env["Endpoints"] = self.backend.create(env, spec)
            env["_spec"] = spec
            ver = new_id("ver")
            env["CurrentVersionID"] = ver
            env["_versions"] = [ver]
            dep = self._dep("deploy", env["ID"], status="running", version=ver)
            dep["_final"] = "succeeded"
            return 202, {"deployment": dep, "phases": self.phases[dep["ID"]]}
        m = re.fullmatch(r"/v1/envs/([^/]+)(/touch)?", path)
        if m and ((method == "POST" and m.group(2)) or (method == "PATCH" and not m.group(2))):
            env = self._env(m.group(1))
            for k, f in (("idle_ttl_sec", "IdleTTLSec"), ("max_ttl_sec", "MaxTTLSec"), ("ttl_action", "TTLAction")):
                if k in b:
                    env[f] = b[k]
            return 200, {"environment": self._public(env), "expires_at": None, "idle_expires_at": None}
        m = re.fullmatch(r"/v1/deployments/([^/]+)", path)
        if method == "GET" and m:
            dep = self.deps.get(m.group(1))
            if dep is None:
                raise ApiError(404, "deployment not found")
            self.polls[dep["ID"]] += 1
            if "_final" in dep and self.polls[dep["ID"]] > self.running_polls:
                dep["Status"] = dep.pop("_final")
            return 200, {"deployment": {k: v for k, v in dep.items() if not k.startswith("_")},
                         "phases": self.phases[dep["ID"]]}
        m = re.fullmatch(r"/v1/envs/([^/]+)/commands(?:/([^/]+)(/[a-z]+)?)?", path)
        if m:
            return self._commands(method, self._env(m.group(1)), m.group(2), m.group(3) or "", q, b)
        m = re.fullmatch(r"/v1/envs/([^/]+)(/[a-z]+)?", path)
        if not m:
            raise ApiError(404, f"no route {method} {path}")
        env = self._env(m.group(1))
        sub = m.group(2) or ""
        if method == "GET" and sub == "":
            return 200, {"environment": self._public(env), "connected": True}
        if method == "DELETE" and sub == "":
            self.backend.destroy(env["ID"])
            env["Status"] = "destroyed"
            dep = self._dep("destroy", env["ID"], status="running")
            dep["_final"] = "succeeded"
            return 202, {"deployment": dep}
        if method == "POST" and sub == "/snapshot":
            ver = new_id("ver")
            dep = self._dep("snapshot", env["ID"], status="running", version=ver,
                            phases=[("snapshot", {}), ("health", {}), ("verdict", {"version": ver})])
            dep["_final"] = self.snapshot_status
            if self.snapshot_status == "succeeded":
                self.backend.snapshot(env["ID"], ver)
                env["_versions"].append(ver)
                env["CurrentVersionID"] = ver
            else:
                dep["Error"] = "snapshot: host refused"
            return 202, {"deployment": dep, "phases": self.phases[dep["ID"]]}
        if method == "POST" and sub == "/verify":
            dep = self._dep("verify", env["ID"], status="running",
                            phases=[("stop", {}), ("collect", {}), ("snapshot", {}), ("clone", {}),
                                    ("grade", {}), ("verdict", dict(self.verdict))])
            dep["_final"] = self.verify_status
            if self.verify_status != "succeeded":
                dep["Error"] = "grade: grader failed"
            return 202, {"deployment": dep, "phases": self.phases[dep["ID"]]}
        if method == "POST" and sub in ("/pause", "/resume"):
            paused = set(env.get("PausedServices") or [])
            svcs = [b["service"]] if b.get("service") else ["box"]
            changed = [x for x in svcs if (x not in paused) == (sub == "/pause")]
            paused = paused | set(svcs) if sub == "/pause" else paused - set(svcs)
            env["PausedServices"] = sorted(paused)
            env["Paused"] = bool(paused)
            return 200, {"environment": self._public(env), sub[1:] + "d": changed}
        if method == "POST" and sub == "/exec":
            cmd = b.get("cmd")
            if not isinstance(cmd, list) or not cmd:
                raise ApiError(400, "cmd must be a non-empty array of strings")
            res = self.backend.exec(env["ID"], b.get("service", ""), cmd, int(b.get("timeout_sec") or 120))
            doc = {"exit_code": res[0], "stdout": res[1], "stderr": res[2]}
            if len(res) > 3 and res[3]:
                doc["truncated"] = True
            return 200, doc
        if sub == "/files":
            if not q.get("service") or not q.get("path"):
                raise ApiError(400, "service and path are required")
            if method == "PUT":
                data = body if isinstance(body, bytes) else b""
                if len(data) > 32 * 1024 * 1024:
                    raise ApiError(413, "archive larger than 32 MiB")
                self.backend.put(env["ID"], q["service"], q["path"], data)
                return 200, {"ok": True, "bytes": len(data)}
            if method == "GET":
                return 200, self.backend.get(env["ID"], q["service"], q["path"])
        raise ApiError(404, f"no route {method} {path}")

    # Background commands: run to their end at once through the backend's exec.
    def _commands(self, method: str, env: dict[str, Any], cid: str | None, sub: str, q: dict[str, str],
                  b: Any) -> tuple[int, Any]:
        cmds = env.setdefault("_commands", {})
        if method == "POST" and cid is None:
            res = self.backend.exec(env["ID"], b.get("service", ""), b.get("cmd"), int(b.get("timeout_sec") or 120))
            c = {"id": new_id("bg"), "service": b.get("service"), "cmd": b.get("cmd"), "state": "exited",
                 "done": True, "exit_code": res[0], "_out": [res[1].encode(), res[2].encode()]}
            cmds[c["id"]] = c
            return 201, {"command": self._cmd(c)}
        if method == "GET" and cid is None:
            return 200, {"commands": [self._cmd(c) for c in cmds.values()]}
        c = cmds.get(cid or "")
        if c is None:
            raise ApiError(404, f"no background command {cid} in environment {env['ID']}")
        if method == "GET" and sub == "/output":
            doc = self._cmd(c)
            doc["encoding"] = "base64"
            for i, name in enumerate(("stdout", "stderr")):
                off = int(q.get(f"{name}_offset") or 0)
                part = c["_out"][i][off:]
                doc[name] = base64.b64encode(part).decode()
                doc[f"{name}_offset"] = off + len(part)
            return 200, {"command": doc}
        if (method == "GET" and sub == "") or (method == "POST" and sub == "/wait"):
            return 200, {"command": self._cmd(c)}
        if method == "POST" and sub == "/signal":
            raise ApiError(409, f"background command {cid} has ended")
        raise ApiError(404, f"no route {method} commands/{cid}{sub}")

    @staticmethod
    def _cmd(c: dict[str, Any]) -> dict[str, Any]:
        d = {k: v for k, v in c.items() if not k.startswith("_")}
        d["stdout_bytes"], d["stderr_bytes"] = len(c["_out"][0]), len(c["_out"][1])
        return d

    @staticmethod
    def _public(env: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in env.items() if not k.startswith("_")}
