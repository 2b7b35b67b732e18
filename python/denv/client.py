"""The denv REST client: sandboxes, versions, exec and file transfer.

Every call is synchronous. A refused request raises ``DenvError`` (a
``RuntimeError``) whose text is ``denv <METHOD> <path>: <status> <message>``;
a request that gets no answer in time raises ``DenvTimeout``, which is both a
``DenvError`` and a ``TimeoutError``.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import io
import os
import posixpath
import re
import shlex
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import httpx
import yaml

from denv import context
from denv._version import VERSION

DEFAULT_SERVER = "http://localhost:8080"
MAX_ARCHIVE = 32 * 1024 * 1024  # the API refuses larger uploads with 413
# A file larger than this moves in parts of this size, each its own archive
# under MAX_ARCHIVE with room for the tar headers, joined (or cut) by a
# command in the container.
PART_MAX = 24 * 1024 * 1024
# Where those parts wait in the container: /tmp/.denv_part.<random hex>.<n>.
PART_DIR = "/tmp"
PART_NAME = ".denv_part."
# denvd keeps at most this much of each of stdout and stderr (man denvd, env.exec).
EXEC_OUTPUT_MAX = 1024 * 1024
# Links get_bytes follows before ELOOP (Linux's path walk allows 40).
MAX_SYMLINKS = 40
FINAL_STATUSES = ("succeeded", "failed", "rolled_back")
# Extra seconds on top of a server-side wait before the HTTP request gives up.
HTTP_MARGIN = 60.0

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class DenvError(RuntimeError):
    """A request the control plane refused, or could not be made."""

    def __init__(self, method: str, path: str, status: int | str, message: str) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.message = message
        super().__init__(f"denv {method} {path}: {status} {message}")


class DenvTimeout(DenvError, TimeoutError):
    """No answer within the HTTP timeout (or the server answered 504)."""


@dataclass
class Sandbox:
    id: str
    name: str
    status: str
    endpoints: dict[str, str] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExecResult:
    """What a command printed and how it exited.

    ``truncated`` is true when denvd cut stdout or stderr at ``EXEC_OUTPUT_MAX``
    (1 MiB each): what was printed beyond that is gone.
    """

    exit_code: int
    stdout: str
    stderr: str
    truncated: bool = False


@dataclass
class CommandOutput:
    """A background command's recorded output from two offsets (bytes as
    the process wrote them) and its state. Pass ``stdout_offset`` and
    ``stderr_offset`` back to read on from where this stopped; ``done`` is
    true once it has ended (``exit_code`` is then its code)."""

    id: str
    state: str
    done: bool
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    stdout_offset: int
    stderr_offset: int
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass
class Verdict:
    deployment_id: str
    reward: float | None
    refused: list[str]
    missing: list[str]
    source: str
    status: str
    evidence: dict[str, Any]


def shell_body(
    script: str,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """``script`` after the exports of ``env`` and the ``cd`` to ``cwd`` (a failed ``cd`` fails it)."""
    lines: list[str] = []
    for key, value in (env or {}).items():
        if not _ENV_NAME.match(key):
            raise ValueError(f"denv: invalid environment variable name {key!r}")
        lines.append(f"export {key}={shlex.quote(str(value))}")
    if cwd:
        lines.append(f"cd -- {shlex.quote(cwd)} || exit $?")
    lines.append(script)
    return "\n".join(lines)


def shell_command(
    script: str,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    user: str | int | None = None,
    script_file: str | None = None,
) -> list[str]:
    """One argv that runs ``script`` with bash if the image has it, else sh.

    ``env`` is exported first, then ``cwd`` is entered (a failed ``cd`` fails
    the command). A ``user`` other than root wraps it all in
    ``su -s /bin/sh <user> -c``; a numeric uid is looked up in /etc/passwd.
    With ``script_file`` the shell reads the script from that file instead
    (the caller put ``shell_body(...)`` there): one argv string is capped by
    the kernel at 128 KiB and a request body by the API at 1 MiB.
    """
    if script_file is not None:
        pick = 'if command -v bash >/dev/null 2>&1; then exec bash "$1"; else exec sh "$1"; fi'
        argv = ["sh", "-c", pick, "sh", script_file]
    else:
        pick = 'if command -v bash >/dev/null 2>&1; then exec bash -c "$1"; else exec sh -c "$1"; fi'
        argv = ["sh", "-c", pick, "sh", shell_body(script, cwd=cwd, env=env)]
    if user is None or str(user) in ("root", "0"):
        return argv
    inner = shlex.join(argv)
    if isinstance(user, int) or str(user).isdigit():
        uid = int(user)
        name = f"\"$(awk -F: '$3=={uid} {{print $1; exit}}' /etc/passwd)\""
        return ["sh", "-c", f"exec su -s /bin/sh {name} -c {shlex.quote(inner)}"]
    return ["su", "-s", "/bin/sh", str(user), "-c", inner]


def _tar_member_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """Extraction filter: skip devices and FIFOs, refuse escapes (data filter)."""
    if member.isdev():
        return None
    return tarfile.data_filter(member, dest)


def _strip_root(members: list[tarfile.TarInfo], root: str) -> list[tarfile.TarInfo]:
    """The members below ``root`` (a top directory name), renamed relative to it.

    This is ``docker cp src/.``: the archive of a directory holds the directory
    itself as its first entry; its contents are what the caller wants.
    """
    out: list[tarfile.TarInfo] = []
    for m in members:
        name = m.name
        while name.startswith("./"):
            name = name[2:]
        name = name.rstrip("/")
        if root:
            if name == root:
                continue
            if not name.startswith(root + "/"):
                continue
            name = name[len(root) + 1 :]
        if name in ("", "."):
            continue
        m.name = name
        out.append(m)
    return out


def _os_error(e: DenvError, path: str) -> OSError | None:
    """The OSError a host's refusal of a file read means, or None when it is no such refusal.

    denvd answers ``env.get: docker cp PATH: <Docker's reason>`` with a 502.
    The caller drops the DenvError for not found and not a directory (it says
    no more) and keeps it as ``__cause__`` for a denial (the host's words name
    what refused)."""
    if e.status != 502:
        return None
    msg = e.message.lower()
    if "could not find the file" in msg or "no such file or directory" in msg or "no such container:path" in msg:
        return FileNotFoundError(errno.ENOENT, "No such file or directory", path)
    if "not a directory" in msg:
        return NotADirectoryError(errno.ENOTDIR, "Not a directory", path)
    if "permission denied" in msg:
        return PermissionError(errno.EACCES, "Permission denied", path)
    return None


def _one_file_tar(name: str, data: bytes, mode: int, uid: int, gid: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = mode
        info.uid = int(uid)
        info.gid = int(gid)
        info.mtime = int(time.time())
        tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# sh -c JOIN_PARTS sh TARGET MODE UID:GID PART...: the parts joined into a new
# file beside TARGET, then renamed onto it (a reader never sees half a file).
# A directory at TARGET is refused in the words Docker uses.
JOIN_PARTS = (
    'set -e; t=$1; m=$2; o=$3; shift 3\n'
    'if [ -d "$t" ]; then echo "cannot overwrite directory $t" >&2; exit 1; fi\n'
    'd=$(dirname -- "$t"); mkdir -p -- "$d"\n'
    'n="$d/.denv_join.$$"\n'
    'trap \'rm -f -- "$n"\' EXIT\n'
    'cat -- "$@" >"$n"; rm -f -- "$@"\n'
    'chmod "$m" "$n"\n'
    'if [ "$(id -u)" = 0 ]; then chown "$o" "$n"; fi\n'
    'mv -f -- "$n" "$t"\n'
)
# sh -c CUT_PART sh SOURCE PART SKIP COUNT: COUNT MiB of SOURCE from SKIP MiB on.
CUT_PART = 'dd if="$1" of="$2" bs=1048576 skip="$3" count="$4" 2>/dev/null && chmod 600 "$2"'


def _ttl_fields(idle: int | None, max_: int | None, action: str | None) -> dict[str, Any]:
    """The TTL members of a request body: only those given."""
    out: dict[str, Any] = {}
    if idle is not None:
        out["idle_ttl_sec"] = int(idle)
    if max_ is not None:
        out["max_ttl_sec"] = int(max_)
    if action is not None:
        out["ttl_action"] = str(action)
    return out


class Client:
    """A client of one control plane, authenticated by a team API key."""

    def __init__(
        self,
        server: str | None = None,
        api_key: str | None = None,
        timeout: float = 900.0,
    ) -> None:
        self.server = (server or os.environ.get("DENV_SERVER") or DEFAULT_SERVER).rstrip("/")
        key = api_key or os.environ.get("DENV_API_KEY")
        if not key:
            raise RuntimeError("DENV_API_KEY is not set")
        self.api_key = key
        self.timeout = timeout
        self.poll_interval = 0.5
        self._http = httpx.Client(
            base_url=self.server,
            headers={"Authorization": f"Bearer {key}", "User-Agent": f"denv-python/{VERSION}"},
            timeout=timeout,
            trust_env=False,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transport ----

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        idempotency_key: str | None = None,
    ) -> httpx.Response:
        t = self.timeout if timeout is None else timeout
        if idempotency_key:
            # A retry with the same key gets the first answer (denv-cp(8), IDEMPOTENCY-KEY).
            headers = {**(headers or {}), "Idempotency-Key": idempotency_key}
        try:
            r = self._http.request(
                method, path, json=json, params=params, content=content,
                headers=headers, timeout=t,
            )
        except httpx.TimeoutException:
            raise DenvTimeout(method, path, "timeout", f"no answer within {t:g} s") from None
        except httpx.HTTPError as e:
            raise DenvError(method, path, "unreachable", f"{self.server}: {e}") from None
        if r.status_code >= 400:
            message = r.reason_phrase or "error"
            try:
                doc = r.json()
                if isinstance(doc, dict) and doc.get("error"):
                    message = str(doc["error"])
            except ValueError:
                text = r.text.strip()
                if text:
                    message = text[:500]
            cls = DenvTimeout if r.status_code == 504 else DenvError
            raise cls(method, path, r.status_code, message)
        return r

    def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        r = self._request(method, path, **kw)
        if not r.content:
            return {}
        try:
            doc = r.json()
        except ValueError:
            raise DenvError(method, path, r.status_code, "answer is not JSON") from None
        if not isinstance(doc, dict):
            raise DenvError(method, path, r.status_code, "answer is not a JSON object")
        return doc

    # ---- deployments ----

    def deployment(self, dep_id: str) -> dict[str, Any]:
        """``GET /v1/deployments/{id}``: ``{deployment, phases}``."""
        return self._json("GET", f"/v1/deployments/{dep_id}")

    def wait_deployment(self, dep_id: str, timeout_sec: float) -> dict[str, Any]:
        """Poll a deployment until it is final; ``{deployment, phases}``."""
        deadline = time.monotonic() + timeout_sec
        while True:
            doc = self.deployment(dep_id)
            if (doc.get("deployment") or {}).get("Status") in FINAL_STATUSES:
                return doc
            if time.monotonic() >= deadline:
                raise DenvTimeout(
                    "GET", f"/v1/deployments/{dep_id}", "timeout",
                    f"deployment not finished within {timeout_sec:g} s",
                )
            time.sleep(self.poll_interval)

    @staticmethod
    def _dep_id(doc: dict[str, Any], method: str, path: str) -> str:
        dep = doc.get("deployment") or {}
        dep_id = dep.get("ID")
        if not dep_id:
            raise DenvError(method, path, "?", "answer has no deployment id")
        return str(dep_id)

    # ---- projects ----

    def ensure_project(self, name: str, kind: str = "rl-environment") -> None:
        """Create the project unless it exists (``POST /v1/projects``; 409 is fine)."""
        try:
            self._json("POST", "/v1/projects", json={"name": name, "kind": kind})
        except DenvError as e:
            if e.status != 409:
                raise

    def upload_context(self, tar_bytes: bytes) -> str:
        """``PUT /v1/contexts/{sha256}`` unless the server has it; the sha256."""
        d = context.digest(tar_bytes)
        try:
            self._json("GET", f"/v1/contexts/{d}")
        except DenvError as e:
            if e.status != 404:
                raise
            self._json("PUT", f"/v1/contexts/{d}", content=bytes(tar_bytes),
                       headers={"Content-Type": "application/x-tar"})
        return d

    def pack_contexts(self, compose: str, base_dir: str | os.PathLike[str]) -> dict[str, str]:
        """{service: sha256} for the services of compose text with build:, each
        context (relative to base_dir, the compose file's directory) packed
        and uploaded (denv.context)."""
        try:
            doc = yaml.safe_load(compose)
        except yaml.YAMLError:
            return {}  # the server refuses the file with its reason
        out: dict[str, str] = {}
        for name, b in context.build_services(doc).items():
            tar = context.pack(context.context_dir(base_dir, b["context"]), b["dockerfile"], service=name)
            out[name] = self.upload_context(tar)
        return out

    def deploy(
        self,
        project: str,
        compose: str | os.PathLike[str],
        env: str | None = None,
        warm: str | Sequence[str] | None = None,
        timeout_sec: int = 900,
        base_dir: str | os.PathLike[str] | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Deploy compose text to an environment of a project; the final deployment object.

        ``compose`` is the file's text, or a path (``pathlib.Path``) to read it
        from. Services with ``build:`` have their contexts packed relative to
        the compose file's directory, as docker compose does: the path's
        directory, else ``base_dir`` (default: the current directory).
        ``warm`` replaces the file's x-denv.warm: a string runs under ``sh -c``,
        a list is the argv (a list of one string with spaces is a shell command
        too; see denv-compose(5)). With ``idempotency_key``, a call repeated
        with the same key and arguments waits for the first one's deployment
        instead of starting another."""
        path = f"/v1/projects/{project}/deploy"
        if isinstance(compose, os.PathLike):
            base_dir = base_dir if base_dir is not None else Path(compose).resolve().parent
            compose = Path(compose).read_text()
        body: dict[str, Any] = {"compose": compose}
        contexts = self.pack_contexts(compose, base_dir if base_dir is not None else os.getcwd())
        if contexts:
            body["contexts"] = contexts
        if env:
            body["env"] = env
        if warm:
            # A str is itself a Sequence[str]: sent whole, never as characters.
            body["warm"] = warm if isinstance(warm, str) else [str(w) for w in warm]
        doc = self._json("POST", path, json=body, idempotency_key=idempotency_key)
        dep_id = self._dep_id(doc, "POST", path)
        final = self.wait_deployment(dep_id, timeout_sec)
        dep = final.get("deployment") or {}
        if dep.get("Status") != "succeeded":
            raise DenvError("POST", path, dep.get("Status", "?"),
                            str(dep.get("Error") or f"deployment {dep_id} did not succeed"))
        if not dep.get("EnvID"):
            dep["EnvID"] = (doc.get("deployment") or {}).get("EnvID")
        return dep

    # ---- sandboxes and versions ----

    def sandbox(
        self,
        *,
        image: str | None = None,
        from_version: str | None = None,
        build: str | os.PathLike[str] | None = None,
        dockerfile: str = "Dockerfile",
        cmd: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        ports: Sequence[int | str] | None = None,
        egress: str = "deny",
        volumes: Sequence[str] | None = None,
        name: str | None = None,
        project: str | None = None,
        timeout_sec: int = 600,
        idle_ttl_sec: int | None = None,
        max_ttl_sec: int | None = None,
        ttl_action: str | None = None,
        idempotency_key: str | None = None,
    ) -> Sandbox:
        """``POST /v1/sandboxes``: an environment from an image or a version, healthy.

        ``build=DIR`` instead builds the image on the host from the directory
        (its ``dockerfile``, ``.dockerignore`` honoured): a one-service deploy
        to ``project`` (default ``sandboxes``), with the image form's other
        arguments; ``cmd`` defaults to the image's own.

        ``idle_ttl_sec`` / ``max_ttl_sec`` (0: none; None: the server's
        sandbox defaults) have the control plane destroy the sandbox after
        that long without activity / after creation; ``ttl_action`` is
        ``destroy``. See :meth:`touch` and :meth:`set_ttl`.

        With ``idempotency_key`` (image and from_version forms), a retry with
        the same key and arguments gets the first call's sandbox, not a
        second one."""
        if sum(x is not None and x != "" for x in (image, from_version, build)) != 1:
            raise ValueError("denv: sandbox needs exactly one of image, from_version or build")
        if egress not in ("deny", "allow"):
            raise ValueError(f"denv: egress must be deny or allow, not {egress!r}")
        if build is not None:
            return self._build_sandbox(build, dockerfile, cmd, env, ports, egress, volumes, name, project,
                                       timeout_sec, idempotency_key)
        body: dict[str, Any] = {"timeout_sec": int(timeout_sec)}
        body.update(_ttl_fields(idle_ttl_sec, max_ttl_sec, ttl_action))
        if image or egress != "deny":
            # A version carries its own egress; only an explicit allow overrides it.
            body["egress"] = egress
        if image:
            body["image"] = image
            if cmd is not None:
                body["cmd"] = [str(c) for c in cmd]
            if env:
                body["env"] = {str(k): str(v) for k, v in env.items()}
            if ports:
                body["ports"] = [str(p) for p in ports]
            if volumes is not None:
                body["volumes"] = [str(v) for v in volumes]
        else:
            body["from_version"] = from_version
        if name:
            body["name"] = name
        if project:
            body["project"] = project
        doc = self._json("POST", "/v1/sandboxes", json=body,
                         timeout=max(self.timeout, timeout_sec + HTTP_MARGIN), idempotency_key=idempotency_key)
        return self._sandbox_of(doc.get("environment") or {})

    def _build_sandbox(
        self,
        build: str | os.PathLike[str],
        dockerfile: str,
        cmd: Sequence[str] | None,
        env: Mapping[str, str] | None,
        ports: Sequence[int | str] | None,
        egress: str,
        volumes: Sequence[str] | None,
        name: str | None,
        project: str | None,
        timeout_sec: int,
        idempotency_key: str | None = None,
    ) -> Sandbox:
        svc: dict[str, Any] = {"build": {"context": os.path.abspath(os.fspath(build)), "dockerfile": dockerfile}}
        if cmd is not None:
            svc["command"] = [str(c) for c in cmd]
        if env:
            svc["environment"] = {str(k): str(v) for k, v in env.items()}
        if ports:
            svc["ports"] = [str(p) for p in ports]
        paths = ["/work"] if volumes is None else [str(v) for v in volumes]
        svc["volumes"] = [f"v{i}:{p}" for i, p in enumerate(paths)]
        compose = {"x-denv": {"egress": egress}, "services": {"sandbox": svc},
                   "volumes": {f"v{i}": {} for i in range(len(paths))}}
        project = project or "sandboxes"
        self.ensure_project(project)
        if idempotency_key and not name:
            # The generated name would differ on a retry: derive it from the key.
            name = "sbx-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:6]
        dep = self.deploy(project, yaml.safe_dump(compose, sort_keys=False),
                          env=name or f"sbx-{os.urandom(3).hex()}", timeout_sec=timeout_sec,
                          idempotency_key=idempotency_key)
        return self._sandbox_of(self.environment(str(dep.get("EnvID") or "")))

    @staticmethod
    def _sandbox_of(env: dict[str, Any]) -> Sandbox:
        eps = env.get("Endpoints") or {}
        endpoints = {str(k): str(v) for k, v in eps.items()} if isinstance(eps, dict) else {}
        return Sandbox(
            id=str(env.get("ID", "")),
            name=str(env.get("Name", "")),
            status=str(env.get("Status", "")),
            endpoints=endpoints,
            raw=env,
        )

    def touch(self, env_id: str) -> dict[str, Any]:
        """``POST /v1/envs/{id}/touch``: reset the idle TTL's clock;
        ``{environment, expires_at, idle_expires_at}``."""
        return self._json("POST", f"/v1/envs/{env_id}/touch")

    def set_ttl(
        self,
        env_id: str,
        idle_ttl_sec: int | None = None,
        max_ttl_sec: int | None = None,
        ttl_action: str | None = None,
    ) -> dict[str, Any]:
        """``PATCH /v1/envs/{id}``: change the TTLs given (0 turns one off);
        ``{environment, expires_at, idle_expires_at}``."""
        body = _ttl_fields(idle_ttl_sec, max_ttl_sec, ttl_action)
        if not body:
            raise ValueError("denv: set_ttl needs idle_ttl_sec, max_ttl_sec or ttl_action")
        return self._json("PATCH", f"/v1/envs/{env_id}", json=body)

    def pause(self, env_id: str, service: str | None = None) -> dict[str, Any]:
        """``POST /v1/envs/{id}/pause``: freeze every service (or one) on its
        host, memory and data kept; ``{environment, paused}``."""
        body = {"service": service} if service else {}
        return self._json("POST", f"/v1/envs/{env_id}/pause", json=body)

    def resume(self, env_id: str, service: str | None = None) -> dict[str, Any]:
        """``POST /v1/envs/{id}/resume``: thaw what :meth:`pause` froze; ``{environment, resumed}``."""
        body = {"service": service} if service else {}
        return self._json("POST", f"/v1/envs/{env_id}/resume", json=body)

    def environment(self, env_id: str) -> dict[str, Any]:
        """``GET /v1/envs/{id}``: the environment object."""
        return self._json("GET", f"/v1/envs/{env_id}").get("environment") or {}

    def destroy(self, env_id: str) -> None:
        """``DELETE /v1/envs/{id}``; returns when the destroy deployment is final."""
        path = f"/v1/envs/{env_id}"
        doc = self._json("DELETE", path)
        dep = (doc.get("deployment") or {}).get("ID")
        if not dep:
            return
        final = self.wait_deployment(str(dep), 300)
        d = final.get("deployment") or {}
        if d.get("Status") != "succeeded":
            raise DenvError("DELETE", path, d.get("Status", "?"),
                            str(d.get("Error") or "destroy did not succeed"))

    def current_version(self, env_id: str) -> str:
        return str(self.environment(env_id).get("CurrentVersionID") or "")

    def snapshot(self, env_id: str, timeout_sec: int = 300) -> str:
        """Capture live state as a new version; its id."""
        path = f"/v1/envs/{env_id}/snapshot"
        doc = self._json("POST", path)
        dep_id = self._dep_id(doc, "POST", path)
        final = self.wait_deployment(dep_id, timeout_sec)
        dep = final.get("deployment") or {}
        if dep.get("Status") != "succeeded":
            raise DenvError("POST", path, dep.get("Status", "?"),
                            str(dep.get("Error") or f"snapshot {dep_id} did not succeed"))
        version = dep.get("VersionID") or (doc.get("deployment") or {}).get("VersionID")
        if not version:
            raise DenvError("POST", path, "?", f"snapshot {dep_id} names no version")
        return str(version)

    def fork(
        self,
        env_id: str,
        name: str | None = None,
        timeout_sec: int = 600,
        live: bool = True,
    ) -> Sandbox:
        """A new environment from ``env_id``: its live state (snapshot first) or its current version."""
        if live:
            version = self.snapshot(env_id, timeout_sec=min(timeout_sec, 300) or 300)
        else:
            version = self.current_version(env_id)
            if not version:
                raise DenvError("GET", f"/v1/envs/{env_id}", "?", "environment has no current version")
        return self.sandbox(from_version=version, name=name, timeout_sec=timeout_sec)

    def verify(self, env_id: str, resume: bool = False, timeout_sec: int = 900) -> Verdict:
        """Run the environment's verifier; the verdict phase's record."""
        path = f"/v1/envs/{env_id}/verify"
        doc = self._json("POST", path, json={"resume": bool(resume)})
        dep_id = self._dep_id(doc, "POST", path)
        final = self.wait_deployment(dep_id, timeout_sec)
        dep = final.get("deployment") or {}
        status = str(dep.get("Status", ""))
        evidence: dict[str, Any] = {}
        for ph in final.get("phases") or []:
            if ph.get("Name") == "verdict" and isinstance(ph.get("Evidence"), dict):
                evidence = ph["Evidence"]
        # A failed verify with no verdict to read is an error; one whose verdict
        # recorded the outcome (reward null) is returned as it stands.
        if status != "succeeded" and "reward" not in evidence:
            raise DenvError("POST", path, status or "?",
                            str(dep.get("Error") or f"verify {dep_id} failed"))
        reward = evidence.get("reward")
        refused = []
        for r in evidence.get("refused") or []:
            if isinstance(r, dict):
                refused.append(f"{r.get('path', '?')}: {r.get('reason', '?')}")
            else:
                refused.append(str(r))
        return Verdict(
            deployment_id=dep_id,
            reward=float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None,
            refused=refused,
            missing=[str(m) for m in evidence.get("missing") or []],
            source=str(evidence.get("source") or "error"),
            status=status,
            evidence=evidence,
        )

    # ---- inside an environment ----

    def exec(self, env_id: str, service: str, cmd: Sequence[str], timeout_sec: int = 120) -> ExecResult:
        if isinstance(cmd, str):
            raise TypeError("denv: exec takes an argv list; use shell_command() for a script")
        path = f"/v1/envs/{env_id}/exec"
        try:
            doc = self._json(
                "POST", path,
                json={"service": service, "cmd": [str(c) for c in cmd], "timeout_sec": int(timeout_sec)},
                timeout=max(30.0, timeout_sec + HTTP_MARGIN),
            )
        except DenvTimeout:
            raise
        except DenvError as e:
            # denvd's own timeout comes back as a 502 "env.exec: timed out after N s"
            if e.status == 502 and "env.exec: timed out" in e.message:
                raise DenvTimeout(e.method, e.path, e.status, e.message) from None
            raise
        out = str(doc.get("stdout") or "")
        err = str(doc.get("stderr") or "")
        # denv-cp passes denvd's flag on when either stream was cut at the cap.
        truncated = bool(doc.get("truncated"))
        return ExecResult(exit_code=int(doc.get("exit_code", -1)), stdout=out, stderr=err, truncated=truncated)

    # ---- background commands (denv-cp(8), "Background commands") ----

    def start_command(
        self,
        env_id: str,
        service: str,
        cmd: Sequence[str],
        timeout_sec: int | None = None,
        idempotency_key: str | None = None,
    ) -> str:
        """Start ``cmd`` in the service and return its id at once; it runs on
        after this call (and this client) have gone."""
        if isinstance(cmd, str):
            raise TypeError("denv: start_command takes an argv list; use shell_command() for a script")
        body: dict[str, Any] = {"service": service, "cmd": [str(c) for c in cmd]}
        if timeout_sec is not None:
            body["timeout_sec"] = int(timeout_sec)
        doc = self._json("POST", f"/v1/envs/{env_id}/commands", json=body, idempotency_key=idempotency_key)
        return str((doc.get("command") or {}).get("id") or "")

    def commands(self, env_id: str) -> list[dict[str, Any]]:
        """The environment's background commands, oldest first."""
        return list(self._json("GET", f"/v1/envs/{env_id}/commands").get("commands") or [])

    def command(self, env_id: str, cmd_id: str) -> dict[str, Any]:
        """One command: ``state`` (running, exited, lost), ``done``, ``exit_code``, output sizes."""
        return dict(self._json("GET", f"/v1/envs/{env_id}/commands/{cmd_id}").get("command") or {})

    def command_output(
        self, env_id: str, cmd_id: str, stdout_offset: int = 0, stderr_offset: int = 0, wait: int = 0,
    ) -> CommandOutput:
        """Recorded output from the offsets (at most 1 MiB per stream per call),
        after waiting up to ``wait`` seconds for the command to end."""
        params = {"stdout_offset": str(int(stdout_offset)), "stderr_offset": str(int(stderr_offset)),
                  "wait": str(int(wait))}
        doc = self._json("GET", f"/v1/envs/{env_id}/commands/{cmd_id}/output", params=params,
                         timeout=max(self.timeout, wait + HTTP_MARGIN))
        c = dict(doc.get("command") or {})
        code = c.get("exit_code")
        return CommandOutput(
            id=str(c.get("id") or cmd_id), state=str(c.get("state") or ""), done=bool(c.get("done")),
            exit_code=int(code) if isinstance(code, int) else None,
            stdout=base64.b64decode(c.get("stdout") or ""), stderr=base64.b64decode(c.get("stderr") or ""),
            stdout_offset=int(c.get("stdout_offset") or 0), stderr_offset=int(c.get("stderr_offset") or 0),
            raw=c,
        )

    def wait_command(self, env_id: str, cmd_id: str, timeout_sec: int = 600) -> dict[str, Any]:
        """Wait up to ``timeout_sec`` (at most 600) for the end; the command
        (``done`` false if it still runs)."""
        doc = self._json("POST", f"/v1/envs/{env_id}/commands/{cmd_id}/wait",
                         json={"timeout_sec": int(timeout_sec)},
                         timeout=max(self.timeout, timeout_sec + HTTP_MARGIN))
        return dict(doc.get("command") or {})

    def signal_command(self, env_id: str, cmd_id: str, signal: str = "TERM") -> dict[str, Any]:
        """Send ``signal`` (HUP INT QUIT KILL TERM USR1 USR2) to the command and what it started."""
        doc = self._json("POST", f"/v1/envs/{env_id}/commands/{cmd_id}/signal", json={"signal": signal})
        return dict(doc.get("command") or {})

    def kill_command(self, env_id: str, cmd_id: str) -> dict[str, Any]:
        """SIGKILL the command's process tree."""
        return self.signal_command(env_id, cmd_id, "KILL")

    def put_tar(self, env_id: str, service: str, path: str, tar_bytes: bytes, owner: str | None = None) -> None:
        """Extract an archive into ``path`` (created if missing) inside the service.

        The archive's owners are kept unless ``owner`` (``"user[:group]"``, names
        or ids, resolved in the container) says whose everything is."""
        params = {"service": service, "path": path}
        if owner is not None:
            params["owner"] = str(owner)
        self._request(
            "PUT", f"/v1/envs/{env_id}/files", params=params,
            content=bytes(tar_bytes), headers={"Content-Type": "application/x-tar"},
        )

    def get_tar(self, env_id: str, service: str, path: str) -> bytes:
        """A tar of ``path`` (its first entry is ``path`` itself, as ``docker cp`` makes it)."""
        r = self._request("GET", f"/v1/envs/{env_id}/files", params={"service": service, "path": path})
        return r.content

    @staticmethod
    def _split(target_path: str) -> tuple[str, str]:
        target_path = str(target_path)
        if not target_path.startswith("/"):
            raise ValueError(f"denv: {target_path!r} is not an absolute path")
        parent, base = posixpath.split(target_path.rstrip("/"))
        if not base:
            raise ValueError(f"denv: {target_path!r} names no file")
        return parent or "/", base

    def put_bytes(
        self,
        env_id: str,
        service: str,
        target_path: str,
        data: bytes,
        mode: int = 0o644,
        uid: int = 0,
        gid: int = 0,
    ) -> None:
        """Write one file; it is owned by ``uid``:``gid`` (Docker keeps the archive's owner).

        Data over ``PART_MAX`` goes up in parts (one archive each, as the API
        caps one upload at 32 MiB), which a command then joins in the file's
        directory and renames onto it."""
        parent, base = self._split(target_path)
        if len(data) > PART_MAX:
            self._put_parts(env_id, service, target_path, data, mode, uid, gid)
            return
        self.put_tar(env_id, service, parent, _one_file_tar(base, data, mode, uid, gid))

    def _put_parts(self, env_id: str, service: str, target_path: str, data: bytes,
                   mode: int, uid: int, gid: int) -> None:
        tag = os.urandom(16).hex()
        parts = []
        try:
            for i in range(0, len(data), PART_MAX):
                name = f"{PART_NAME}{tag}.{i // PART_MAX}"
                self.put_tar(env_id, service, PART_DIR,
                             _one_file_tar(name, data[i:i + PART_MAX], 0o600, uid, gid))
                parts.append(f"{PART_DIR}/{name}")
            r = self.exec(env_id, service, ["sh", "-c", JOIN_PARTS, "sh", target_path,
                                            f"{mode & 0o7777:o}", f"{uid}:{gid}", *parts], timeout_sec=600)
        finally:
            if parts:
                try:
                    self.exec(env_id, service, ["rm", "-f", "--", *parts], timeout_sec=60)
                except DenvError:
                    pass  # the join removed them, or the environment is gone
        if r.exit_code != 0:
            raise DenvError("PUT", f"/v1/envs/{env_id}/files", 502,
                            f"env.put: joining {len(parts)} parts into {target_path}: {r.stderr.strip()[:500]}")

    def put_file(self, env_id: str, service: str, source: str | os.PathLike[str], target_path: str,
                 owner: str | None = None) -> None:
        src = Path(source)
        data = src.read_bytes()
        if owner is None:
            self.put_bytes(env_id, service, target_path, data, mode=src.stat().st_mode & 0o7777)
            return
        parent, base = self._split(target_path)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            info = tarfile.TarInfo(base)
            info.size = len(data)
            info.mode = src.stat().st_mode & 0o7777
            info.mtime = int(time.time())
            tf.addfile(info, io.BytesIO(data))
        self.put_tar(env_id, service, parent, buf.getvalue(), owner=owner)

    def put_dir(self, env_id: str, service: str, source_dir: str | os.PathLike[str], target_dir: str,
                owner: str | None = None) -> None:
        """Upload the contents of ``source_dir`` into ``target_dir`` (not the directory itself);
        ``owner`` as for ``put_tar``."""
        src = Path(source_dir)
        if not src.is_dir():
            raise NotADirectoryError(f"denv: {src} is not a directory")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for child in sorted(src.iterdir()):
                tf.add(child, arcname=child.name, recursive=True)
        self.put_tar(env_id, service, str(target_dir), buf.getvalue(), owner=owner)

    def get_bytes(self, env_id: str, service: str, source_path: str) -> bytes:
        """The contents of the file at ``source_path``, a symbolic link followed.

        Raises what ``open()`` would: ``FileNotFoundError``, ``IsADirectoryError``,
        ``NotADirectoryError`` (a file on the way), ``PermissionError``. The read
        is root's (``docker cp``), so a file's mode bits do not stop it."""
        path = str(source_path)
        for _ in range(MAX_SYMLINKS):
            try:
                data = self.get_tar(env_id, service, path)
            except DenvError as e:
                if e.status == 413 or "larger than" in e.message.lower():
                    return self.get_parts(env_id, service, path, self.file_size(env_id, service, path))
                oserr = _os_error(e, source_path)
                if oserr is None:
                    raise
                raise oserr from (e if isinstance(oserr, PermissionError) else None)
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
                m = tf.next()
                if m is None:
                    raise FileNotFoundError(errno.ENOENT, "No such file or directory", source_path)
                if m.isdir():
                    raise IsADirectoryError(errno.EISDIR, "Is a directory", source_path)
                if m.issym():
                    path = posixpath.normpath(posixpath.join(posixpath.dirname(path), m.linkname))
                    continue
                if not m.isfile():
                    raise OSError(errno.EINVAL, "Not a regular file", source_path)
                f = tf.extractfile(m)
                return f.read() if f is not None else b""
        raise OSError(errno.ELOOP, "Too many levels of symbolic links", source_path)

    def get_parts(self, env_id: str, service: str, path: str, size: int) -> bytes:
        """The ``size`` bytes of the regular file at ``path``, read in parts of
        ``PART_MAX`` (each cut by ``dd`` into /tmp and fetched as its own archive),
        for a file whose one archive would be over the API's 32 MiB."""
        tag = os.urandom(16).hex()
        step = PART_MAX >> 20
        out = bytearray()
        for i in range(0, max(size, 1), PART_MAX):
            part = f"{PART_DIR}/{PART_NAME}{tag}.{i // PART_MAX}"
            try:
                r = self.exec(env_id, service, ["sh", "-c", CUT_PART, "sh", path, part,
                                                str(i // PART_MAX * step), str(step)], timeout_sec=600)
                if r.exit_code != 0:
                    raise DenvError("GET", f"/v1/envs/{env_id}/files", 502,
                                    f"env.get: cutting {path} at {i}: {r.stderr.strip()[:500]}")
                with tarfile.open(fileobj=io.BytesIO(self.get_tar(env_id, service, part)), mode="r:*") as tf:
                    m = tf.next()
                    f = tf.extractfile(m) if m is not None else None
                    out += f.read() if f is not None else b""
            finally:
                self.exec(env_id, service, ["rm", "-f", "--", part], timeout_sec=60)
        return bytes(out)

    def file_size(self, env_id: str, service: str, path: str) -> int:
        r = self.exec(env_id, service, ["sh", "-c", 'wc -c <"$1"', "sh", path], timeout_sec=60)
        try:
            return int(r.stdout.strip())
        except ValueError:
            raise DenvError("GET", f"/v1/envs/{env_id}/files", 502,
                            f"env.get: size of {path}: {r.stderr.strip()[:500]}") from None

    def get_file(self, env_id: str, service: str, source_path: str, target: str | os.PathLike[str]) -> None:
        data = self.get_bytes(env_id, service, source_path)
        dst = Path(target)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)

    def get_dir(self, env_id: str, service: str, source_dir: str, target_dir: str | os.PathLike[str]) -> None:
        """Extract the contents of ``source_dir`` under ``target_dir`` (``docker cp src/.``)."""
        data = self.get_tar(env_id, service, source_dir)
        dst = Path(target_dir)
        dst.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
            members = tf.getmembers()
            root = ""
            if members:
                first = members[0].name
                while first.startswith("./"):
                    first = first[2:]
                first = first.rstrip("/")
                base = posixpath.basename(str(source_dir).rstrip("/"))
                if members[0].isdir() and first and first == base:
                    root = first
            tf.extractall(dst, members=_strip_root(members, root), filter=_tar_member_filter)
