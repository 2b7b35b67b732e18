"""The denv REST clients: sandboxes, versions, exec and file transfer.

``Client`` is synchronous; ``AsyncClient`` has the same methods as coroutines
(``await c.sandbox(...)``), for trainers that run many rollouts on one event
loop. Both run the same code: every operation is written once, in ``_Ops``,
as a generator that yields the HTTP requests (and the pauses between polls)
it needs; each client only sends them, with httpx's Client or AsyncClient. A refused request raises ``DenvError`` (a
``RuntimeError``) whose text is ``denv <METHOD> <path>: <status> <message>``;
a request that gets no answer in time raises ``DenvTimeout``, which is both a
``DenvError`` and a ``TimeoutError``.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import inspect
import io
import os
import posixpath
import re
import shlex
import tarfile
import asyncio
import contextlib
import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Concatenate, Coroutine, Generator, Generic, Iterator,
                    Mapping, ParamSpec, Sequence, TypeVar, cast, overload)

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
# The longest wait_sec of GET /v1/batches/{id} that wait_batch asks for (denv-cp allows 60).
BATCH_WAIT_MAX = 30

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


@dataclass
class BatchMember:
    """One member of a batch: its environment and its state now (``pending``,
    ``healthy``, ``failed`` with ``error``, or ``destroyed``)."""

    index: int
    name: str
    id: str
    deployment: str
    state: str
    error: str = ""
    endpoints: dict[str, str] = field(default_factory=dict)


@dataclass
class Batch:
    """``GET /v1/batches/{id}``: every member, and whether none is pending."""

    id: str
    members: list[BatchMember]
    done: bool
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def healthy(self) -> list[BatchMember]:
        return [m for m in self.members if m.state == "healthy"]

    @property
    def failed(self) -> list[BatchMember]:
        return [m for m in self.members if m.state == "failed"]

    @classmethod
    def of(cls, doc: dict[str, Any]) -> "Batch":
        members: list[BatchMember] = []
        for m in doc.get("members") or []:
            eps = m.get("endpoints") or {}
            members.append(BatchMember(
                index=int(m.get("index", len(members))), name=str(m.get("name", "")),
                id=str(m.get("environment", "")), deployment=str(m.get("deployment", "")),
                state=str(m.get("state", "")), error=str(m.get("error") or ""),
                endpoints={str(k): str(v) for k, v in eps.items()} if isinstance(eps, dict) else {},
            ))
        return cls(id=str((doc.get("batch") or {}).get("ID", "")), members=members,
                   done=bool(doc.get("done")), raw=doc)


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


def _sandbox_body(
    image: str | None,
    from_version: str | None,
    cmd: Sequence[str] | None,
    env: Mapping[str, str] | None,
    ports: Sequence[int | str] | None,
    egress: str,
    volumes: Sequence[str] | None,
    project: str | None,
    ttl: dict[str, Any],
) -> dict[str, Any]:
    """The body of POST /v1/sandboxes and of POST /v1/sandboxes/batch."""
    body: dict[str, Any] = dict(ttl)
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
    if project:
        body["project"] = project
    return body


T = TypeVar("T")


@dataclass
class _Req:
    """One HTTP request an operation needs; the answer is sent back into it
    (a dict with as_json, else the httpx.Response); a refusal is thrown in."""

    method: str
    path: str
    kw: dict[str, Any]
    as_json: bool


@dataclass
class _Sleep:
    """A pause between two polls."""

    sec: float


# An operation: a generator of _Req and _Sleep whose return value is the result.
_Op = Generator["_Req | _Sleep", Any, T]

P = ParamSpec("P")


class _Operation(Generic[P, T]):
    """For type checkers only: what ``name = _Operation(_g_name)`` in ``_Ops``
    stands for. At run time the loop at the end of this module puts a real
    function under each name, on each client (TYPE_CHECKING is false); this
    says what it is: on a Client a call that returns the operation's result,
    on an AsyncClient a coroutine of it."""

    def __init__(self, gen: Callable[Concatenate[Any, P], _Op[T]]) -> None:
        self.gen = gen

    @overload
    def __get__(self, obj: None, owner: type) -> Callable[..., Any]: ...
    @overload
    def __get__(self, obj: "AsyncClient", owner: type | None = None) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(self, obj: "Client", owner: type | None = None) -> Callable[P, T]: ...
    def __get__(self, obj: Any, owner: Any = None) -> Any:
        raise NotImplementedError


def _http_args(method: str, timeout: float, kw: Mapping[str, Any]) -> dict[str, Any]:
    """httpx's request arguments from an operation's: the timeout, and the
    Idempotency-Key header (a retry with the same key gets the first answer;
    denv-cp(8), IDEMPOTENCY-KEY)."""
    headers = kw.get("headers")
    key = kw.get("idempotency_key")
    if key:
        headers = {**(headers or {}), "Idempotency-Key": key}
    t = kw.get("timeout")
    return {"method": method, "json": kw.get("json"), "params": kw.get("params"),
            "content": kw.get("content"), "headers": headers, "timeout": timeout if t is None else t}


@contextlib.contextmanager
def _transport(method: str, path: str, timeout: float, server: str) -> Iterator[None]:
    """httpx's failures as DenvTimeout / DenvError (sync and async requests alike)."""
    try:
        yield
    except httpx.TimeoutException:
        raise DenvTimeout(method, path, "timeout", f"no answer within {timeout:g} s") from None
    except httpx.HTTPError as e:
        raise DenvError(method, path, "unreachable", f"{server}: {e}") from None


def _answer(method: str, path: str, r: httpx.Response) -> httpx.Response:
    """r, or the DenvError of a 4xx/5xx answer (its "error" text) raised."""
    if r.status_code < 400:
        return r
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


@dataclass
class _Done:
    """An operation's end: its result."""

    value: Any


def _step(op: _Op[Any], value: Any, error: BaseException | None) -> "_Req | _Sleep | _Done":
    """The operation's next request or pause after value (or error thrown
    in, so that its own except clauses see a refusal), or its _Done."""
    try:
        return op.throw(error) if error else op.send(value)
    except StopIteration as done:
        return _Done(done.value)


def _doc(method: str, path: str, r: httpx.Response) -> dict[str, Any]:
    if not r.content:
        return {}
    try:
        doc = r.json()
    except ValueError:
        raise DenvError(method, path, r.status_code, "answer is not JSON") from None
    if not isinstance(doc, dict):
        raise DenvError(method, path, r.status_code, "answer is not a JSON object")
    return doc


def _headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "User-Agent": f"denv-python/{VERSION}"}


class _Ops:
    """Every operation of the API, once, for both clients (see the module's
    docstring). A method ``_g_name`` here is ``name`` on ``Client`` (run to
    its end) and on ``AsyncClient`` (awaited)."""

    server: str
    api_key: str
    timeout: float
    poll_interval: float

    def _setup(self, server: str | None, api_key: str | None, timeout: float) -> str:
        self.server = (server or os.environ.get("DENV_SERVER") or DEFAULT_SERVER).rstrip("/")
        key = api_key or os.environ.get("DENV_API_KEY")
        if not key:
            raise RuntimeError("DENV_API_KEY is not set")
        self.api_key = key
        self.timeout = timeout
        self.poll_interval = 0.5
        return key

    def _j(self, method: str, path: str, **kw: Any) -> _Op[dict[str, Any]]:
        doc: dict[str, Any] = yield _Req(method, path, kw, True)
        return doc

    def _r(self, method: str, path: str, **kw: Any) -> _Op[httpx.Response]:
        r: httpx.Response = yield _Req(method, path, kw, False)
        return r

    # ---- deployments ----

    def _g_deployment(self, dep_id: str) -> _Op[dict[str, Any]]:
        """``GET /v1/deployments/{id}``: ``{deployment, phases}``."""
        return (yield from self._j("GET", f"/v1/deployments/{dep_id}"))

    def _g_wait_deployment(self, dep_id: str, timeout_sec: float) -> _Op[dict[str, Any]]:
        """Poll a deployment until it is final; ``{deployment, phases}``."""
        deadline = time.monotonic() + timeout_sec
        while True:
            doc = (yield from self._g_deployment(dep_id))
            if (doc.get("deployment") or {}).get("Status") in FINAL_STATUSES:
                return doc
            if time.monotonic() >= deadline:
                raise DenvTimeout(
                    "GET", f"/v1/deployments/{dep_id}", "timeout",
                    f"deployment not finished within {timeout_sec:g} s",
                )
            yield _Sleep(self.poll_interval)

    @staticmethod
    def _dep_id(doc: dict[str, Any], method: str, path: str) -> str:
        dep = doc.get("deployment") or {}
        dep_id = dep.get("ID")
        if not dep_id:
            raise DenvError(method, path, "?", "answer has no deployment id")
        return str(dep_id)

    # ---- projects ----

    def _g_ensure_project(self, name: str, kind: str = "rl-environment") -> _Op[None]:
        """Create the project unless it exists (``POST /v1/projects``; 409 is fine)."""
        try:
            (yield from self._j("POST", "/v1/projects", json={"name": name, "kind": kind}))
        except DenvError as e:
            if e.status != 409:
                raise

    def _g_upload_context(self, tar_bytes: bytes) -> _Op[str]:
        """``PUT /v1/contexts/{sha256}`` unless the server has it; the sha256."""
        d = context.digest(tar_bytes)
        try:
            (yield from self._j("GET", f"/v1/contexts/{d}"))
        except DenvError as e:
            if e.status != 404:
                raise
            (yield from self._j("PUT", f"/v1/contexts/{d}", content=bytes(tar_bytes),
                       headers={"Content-Type": "application/x-tar"}))
        return d

    def _g_pack_contexts(self, compose: str, base_dir: str | os.PathLike[str]) -> _Op[dict[str, str]]:
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
            out[name] = (yield from self._g_upload_context(tar))
        return out

    def _g_deploy(
        self,
        project: str,
        compose: str | os.PathLike[str],
        env: str | None = None,
        warm: str | Sequence[str] | None = None,
        timeout_sec: int = 900,
        base_dir: str | os.PathLike[str] | None = None,
        idempotency_key: str | None = None,
    ) -> _Op[dict[str, Any]]:
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
        contexts = (yield from self._g_pack_contexts(compose, base_dir if base_dir is not None else os.getcwd()))
        if contexts:
            body["contexts"] = contexts
        if env:
            body["env"] = env
        if warm:
            # A str is itself a Sequence[str]: sent whole, never as characters.
            body["warm"] = warm if isinstance(warm, str) else [str(w) for w in warm]
        doc = (yield from self._j("POST", path, json=body, idempotency_key=idempotency_key))
        dep_id = self._dep_id(doc, "POST", path)
        final = (yield from self._g_wait_deployment(dep_id, timeout_sec))
        dep = final.get("deployment") or {}
        if dep.get("Status") != "succeeded":
            raise DenvError("POST", path, dep.get("Status", "?"),
                            str(dep.get("Error") or f"deployment {dep_id} did not succeed"))
        if not dep.get("EnvID"):
            dep["EnvID"] = (doc.get("deployment") or {}).get("EnvID")
        return dep

    # ---- sandboxes and versions ----

    def _g_sandbox(
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
    ) -> _Op[Sandbox]:
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
            return (yield from self._g__build_sandbox(build, dockerfile, cmd, env, ports, egress, volumes, name, project,
                                       timeout_sec, idempotency_key))
        body = _sandbox_body(image, from_version, cmd, env, ports, egress, volumes, project,
                             _ttl_fields(idle_ttl_sec, max_ttl_sec, ttl_action))
        body["timeout_sec"] = int(timeout_sec)
        if name:
            body["name"] = name
        doc = (yield from self._j("POST", "/v1/sandboxes", json=body,
                         timeout=max(self.timeout, timeout_sec + HTTP_MARGIN), idempotency_key=idempotency_key))
        return self._sandbox_of(doc.get("environment") or {})

    def _g__build_sandbox(
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
    ) -> _Op[Sandbox]:
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
        (yield from self._g_ensure_project(project))
        if idempotency_key and not name:
            # The generated name would differ on a retry: derive it from the key.
            name = "sbx-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:6]
        dep = (yield from self._g_deploy(project, yaml.safe_dump(compose, sort_keys=False),
                          env=name or f"sbx-{os.urandom(3).hex()}", timeout_sec=timeout_sec,
                          idempotency_key=idempotency_key))
        return self._sandbox_of((yield from self._g_environment(str(dep.get("EnvID") or ""))))

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

    def _g_batch(
        self,
        count: int,
        *,
        image: str | None = None,
        from_version: str | None = None,
        cmd: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        ports: Sequence[int | str] | None = None,
        egress: str = "deny",
        volumes: Sequence[str] | None = None,
        name_prefix: str | None = None,
        project: str | None = None,
        wait: bool = True,
        timeout_sec: float = 600,
        on_change: Callable[[BatchMember], None] | None = None,
        idle_ttl_sec: int | None = None,
        max_ttl_sec: int | None = None,
        ttl_action: str | None = None,
        idempotency_key: str | None = None,
    ) -> _Op[Batch]:
        """``POST /v1/sandboxes/batch``: ``count`` sandboxes in one call, from
        one ``image`` or as forks of one healthy version (``from_version``),
        named ``name_prefix`` + index; the arguments are :meth:`sandbox`'s.

        With ``wait`` (the default) it polls the batch until no member is
        pending or ``timeout_sec`` passed (``DenvTimeout``), calling
        ``on_change`` with each member whose state changed (as each becomes
        healthy). A failed member does not raise: it is in ``Batch.failed``
        with its error, beside the healthy ones."""
        if (not image) == (not from_version):
            raise ValueError("denv: batch needs exactly one of image or from_version")
        body = _sandbox_body(image, from_version, cmd, env, ports, egress, volumes, project,
                             _ttl_fields(idle_ttl_sec, max_ttl_sec, ttl_action))
        body["count"] = int(count)
        if name_prefix:
            body["name_prefix"] = name_prefix
        doc = yield from self._j("POST", "/v1/sandboxes/batch", json=body, idempotency_key=idempotency_key)
        batch = Batch.of(doc)
        if not wait:
            return batch
        final = yield from self._g_wait_batch(batch.id, timeout_sec, on_change)
        return final

    def _g_batch_status(self, batch_id: str, wait_sec: int = 0) -> _Op[Batch]:
        """``GET /v1/batches/{id}``: each member's state now; with
        ``wait_sec``, once a pending member's deployment ends (or after that
        long)."""
        params = {"wait_sec": str(int(wait_sec))} if wait_sec else None
        doc = yield from self._j("GET", f"/v1/batches/{batch_id}", params=params,
                                 timeout=max(self.timeout, wait_sec + HTTP_MARGIN))
        return Batch.of(doc)

    def _g_wait_batch(
        self,
        batch_id: str,
        timeout_sec: float = 600,
        on_change: Callable[[BatchMember], None] | None = None,
    ) -> _Op[Batch]:
        """Poll a batch until no member is pending; on_change as for :meth:`batch`."""
        deadline = time.monotonic() + timeout_sec
        seen: dict[int, str] = {}
        while True:
            # The server holds the GET until a member's deployment ends.
            wait = int(min(BATCH_WAIT_MAX, max(0.0, deadline - time.monotonic())))
            b = yield from self._g_batch_status(batch_id, wait_sec=wait if seen else 0)
            changed = False
            for m in b.members:
                if seen.get(m.index) != m.state:
                    seen[m.index] = m.state
                    changed = True
                    if on_change:
                        on_change(m)
            if b.done:
                return b
            if time.monotonic() >= deadline:
                raise DenvTimeout("GET", f"/v1/batches/{batch_id}", "timeout",
                                  f"{sum(m.state == 'pending' for m in b.members)} members still pending "
                                  f"after {timeout_sec:g} s")
            if not changed:
                yield _Sleep(self.poll_interval)

    def _g_metrics(self, env_id: str) -> _Op[dict[str, Any]]:
        """``GET /v1/envs/{id}/metrics``: what the environment uses now,
        ``{services: [{service, status, cpu_usec, memory_bytes,
        memory_limit_bytes, pids}], volumes: [{name, bytes}], storage,
        sampled_at_ms}`` (a figure the host could not read is None). CPU
        time is cumulative: two samples give the rate. Not activity: it does
        not hold off the idle TTL."""
        doc = yield from self._j("GET", f"/v1/envs/{env_id}/metrics")
        return doc

    def _g_logs(
        self,
        env_id: str,
        service: str | None = None,
        tail: int = 100,
        since: str | None = None,
        timestamps: bool = False,
    ) -> _Op[dict[str, Any]]:
        """``GET /v1/envs/{id}/logs``: a service's output (default: the
        environment's first service), ``{service, stdout, stderr,
        truncated?}``; ``tail`` lines of both streams together, only those
        after ``since`` (a timestamp as ``timestamps=True`` prints them)."""
        params: dict[str, str] = {"tail": str(int(tail))}
        if service:
            params["service"] = service
        if since:
            params["since"] = since
        if timestamps:
            params["timestamps"] = "true"
        doc = yield from self._j("GET", f"/v1/envs/{env_id}/logs", params=params)
        return doc

    def _g_touch(self, env_id: str) -> _Op[dict[str, Any]]:
        """``POST /v1/envs/{id}/touch``: reset the idle TTL's clock;
        ``{environment, expires_at, idle_expires_at}``."""
        return (yield from self._j("POST", f"/v1/envs/{env_id}/touch"))

    def _g_set_ttl(
        self,
        env_id: str,
        idle_ttl_sec: int | None = None,
        max_ttl_sec: int | None = None,
        ttl_action: str | None = None,
    ) -> _Op[dict[str, Any]]:
        """``PATCH /v1/envs/{id}``: change the TTLs given (0 turns one off);
        ``{environment, expires_at, idle_expires_at}``."""
        body = _ttl_fields(idle_ttl_sec, max_ttl_sec, ttl_action)
        if not body:
            raise ValueError("denv: set_ttl needs idle_ttl_sec, max_ttl_sec or ttl_action")
        return (yield from self._j("PATCH", f"/v1/envs/{env_id}", json=body))

    def _g_pause(self, env_id: str, service: str | None = None) -> _Op[dict[str, Any]]:
        """``POST /v1/envs/{id}/pause``: freeze every service (or one) on its
        host, memory and data kept; ``{environment, paused}``."""
        body = {"service": service} if service else {}
        return (yield from self._j("POST", f"/v1/envs/{env_id}/pause", json=body))

    def _g_resume(self, env_id: str, service: str | None = None) -> _Op[dict[str, Any]]:
        """``POST /v1/envs/{id}/resume``: thaw what :meth:`pause` froze; ``{environment, resumed}``."""
        body = {"service": service} if service else {}
        return (yield from self._j("POST", f"/v1/envs/{env_id}/resume", json=body))

    def _g_environment(self, env_id: str) -> _Op[dict[str, Any]]:
        """``GET /v1/envs/{id}``: the environment object."""
        return (yield from self._j("GET", f"/v1/envs/{env_id}")).get("environment") or {}

    def _g_destroy(self, env_id: str) -> _Op[None]:
        """``DELETE /v1/envs/{id}``; returns when the destroy deployment is final."""
        path = f"/v1/envs/{env_id}"
        doc = (yield from self._j("DELETE", path))
        dep = (doc.get("deployment") or {}).get("ID")
        if not dep:
            return
        final = (yield from self._g_wait_deployment(str(dep), 300))
        d = final.get("deployment") or {}
        if d.get("Status") != "succeeded":
            raise DenvError("DELETE", path, d.get("Status", "?"),
                            str(d.get("Error") or "destroy did not succeed"))

    def _g_current_version(self, env_id: str) -> _Op[str]:
        return str((yield from self._g_environment(env_id)).get("CurrentVersionID") or "")

    def _g_snapshot(self, env_id: str, timeout_sec: int = 300) -> _Op[str]:
        """Capture live state as a new version; its id."""
        path = f"/v1/envs/{env_id}/snapshot"
        doc = (yield from self._j("POST", path))
        dep_id = self._dep_id(doc, "POST", path)
        final = (yield from self._g_wait_deployment(dep_id, timeout_sec))
        dep = final.get("deployment") or {}
        if dep.get("Status") != "succeeded":
            raise DenvError("POST", path, dep.get("Status", "?"),
                            str(dep.get("Error") or f"snapshot {dep_id} did not succeed"))
        version = dep.get("VersionID") or (doc.get("deployment") or {}).get("VersionID")
        if not version:
            raise DenvError("POST", path, "?", f"snapshot {dep_id} names no version")
        return str(version)

    def _g_fork(
        self,
        env_id: str,
        name: str | None = None,
        timeout_sec: int = 600,
        live: bool = True,
    ) -> _Op[Sandbox]:
        """A new environment from ``env_id``: its live state (snapshot first) or its current version."""
        if live:
            version = (yield from self._g_snapshot(env_id, timeout_sec=min(timeout_sec, 300) or 300))
        else:
            version = (yield from self._g_current_version(env_id))
            if not version:
                raise DenvError("GET", f"/v1/envs/{env_id}", "?", "environment has no current version")
        return (yield from self._g_sandbox(from_version=version, name=name, timeout_sec=timeout_sec))

    def _g_verify(self, env_id: str, resume: bool = False, timeout_sec: int = 900) -> _Op[Verdict]:
        """Run the environment's verifier; the verdict phase's record."""
        path = f"/v1/envs/{env_id}/verify"
        doc = (yield from self._j("POST", path, json={"resume": bool(resume)}))
        dep_id = self._dep_id(doc, "POST", path)
        final = (yield from self._g_wait_deployment(dep_id, timeout_sec))
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

    def _g_exec(self, env_id: str, service: str, cmd: Sequence[str], timeout_sec: int = 120) -> _Op[ExecResult]:
        if isinstance(cmd, str):
            raise TypeError("denv: exec takes an argv list; use shell_command() for a script")
        path = f"/v1/envs/{env_id}/exec"
        try:
            doc = (yield from self._j(
                "POST", path,
                json={"service": service, "cmd": [str(c) for c in cmd], "timeout_sec": int(timeout_sec)},
                timeout=max(30.0, timeout_sec + HTTP_MARGIN),
            ))
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

    def _g_start_command(
        self,
        env_id: str,
        service: str,
        cmd: Sequence[str],
        timeout_sec: int | None = None,
        idempotency_key: str | None = None,
    ) -> _Op[str]:
        """Start ``cmd`` in the service and return its id at once; it runs on
        after this call (and this client) have gone."""
        if isinstance(cmd, str):
            raise TypeError("denv: start_command takes an argv list; use shell_command() for a script")
        body: dict[str, Any] = {"service": service, "cmd": [str(c) for c in cmd]}
        if timeout_sec is not None:
            body["timeout_sec"] = int(timeout_sec)
        doc = yield from self._j("POST", f"/v1/envs/{env_id}/commands", json=body, idempotency_key=idempotency_key)
        return str((doc.get("command") or {}).get("id") or "")

    def _g_commands(self, env_id: str) -> _Op[list[dict[str, Any]]]:
        """The environment's background commands, oldest first."""
        doc = yield from self._j("GET", f"/v1/envs/{env_id}/commands")
        return list(doc.get("commands") or [])

    def _g_command(self, env_id: str, cmd_id: str) -> _Op[dict[str, Any]]:
        """One command: ``state`` (running, exited, lost), ``done``, ``exit_code``, output sizes."""
        doc = yield from self._j("GET", f"/v1/envs/{env_id}/commands/{cmd_id}")
        return dict(doc.get("command") or {})

    def _g_command_output(
        self, env_id: str, cmd_id: str, stdout_offset: int = 0, stderr_offset: int = 0, wait: int = 0,
    ) -> _Op[CommandOutput]:
        """Recorded output from the offsets (at most 1 MiB per stream per call),
        after waiting up to ``wait`` seconds for the command to end."""
        params = {"stdout_offset": str(int(stdout_offset)), "stderr_offset": str(int(stderr_offset)),
                  "wait": str(int(wait))}
        doc = yield from self._j("GET", f"/v1/envs/{env_id}/commands/{cmd_id}/output", params=params,
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

    def _g_wait_command(self, env_id: str, cmd_id: str, timeout_sec: int = 600) -> _Op[dict[str, Any]]:
        """Wait up to ``timeout_sec`` (at most 600) for the end; the command
        (``done`` false if it still runs)."""
        doc = yield from self._j("POST", f"/v1/envs/{env_id}/commands/{cmd_id}/wait",
                                 json={"timeout_sec": int(timeout_sec)},
                                 timeout=max(self.timeout, timeout_sec + HTTP_MARGIN))
        return dict(doc.get("command") or {})

    def _g_signal_command(self, env_id: str, cmd_id: str, signal: str = "TERM") -> _Op[dict[str, Any]]:
        """Send ``signal`` (HUP INT QUIT KILL TERM USR1 USR2) to the command and what it started."""
        doc = yield from self._j("POST", f"/v1/envs/{env_id}/commands/{cmd_id}/signal", json={"signal": signal})
        return dict(doc.get("command") or {})

    def _g_kill_command(self, env_id: str, cmd_id: str) -> _Op[dict[str, Any]]:
        """SIGKILL the command's process tree."""
        return (yield from self._g_signal_command(env_id, cmd_id, "KILL"))

    def _g_put_tar(self, env_id: str, service: str, path: str, tar_bytes: bytes, owner: str | None = None) -> _Op[None]:
        """Extract an archive into ``path`` (created if missing) inside the service.

        The archive's owners are kept unless ``owner`` (``"user[:group]"``, names
        or ids, resolved in the container) says whose everything is."""
        params = {"service": service, "path": path}
        if owner is not None:
            params["owner"] = str(owner)
        (yield from self._r(
            "PUT", f"/v1/envs/{env_id}/files", params=params,
            content=bytes(tar_bytes), headers={"Content-Type": "application/x-tar"},
        ))

    def _g_get_tar(self, env_id: str, service: str, path: str) -> _Op[bytes]:
        """A tar of ``path`` (its first entry is ``path`` itself, as ``docker cp`` makes it)."""
        r = (yield from self._r("GET", f"/v1/envs/{env_id}/files", params={"service": service, "path": path}))
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

    def _g_put_bytes(
        self,
        env_id: str,
        service: str,
        target_path: str,
        data: bytes,
        mode: int = 0o644,
        uid: int = 0,
        gid: int = 0,
    ) -> _Op[None]:
        """Write one file; it is owned by ``uid``:``gid`` (Docker keeps the archive's owner).

        Data over ``PART_MAX`` goes up in parts (one archive each, as the API
        caps one upload at 32 MiB), which a command then joins in the file's
        directory and renames onto it."""
        parent, base = self._split(target_path)
        if len(data) > PART_MAX:
            (yield from self._g__put_parts(env_id, service, target_path, data, mode, uid, gid))
            return
        (yield from self._g_put_tar(env_id, service, parent, _one_file_tar(base, data, mode, uid, gid)))

    def _g__put_parts(self, env_id: str, service: str, target_path: str, data: bytes,
                   mode: int, uid: int, gid: int) -> _Op[None]:
        tag = os.urandom(16).hex()
        parts = []
        try:
            for i in range(0, len(data), PART_MAX):
                name = f"{PART_NAME}{tag}.{i // PART_MAX}"
                (yield from self._g_put_tar(env_id, service, PART_DIR,
                             _one_file_tar(name, data[i:i + PART_MAX], 0o600, uid, gid)))
                parts.append(f"{PART_DIR}/{name}")
            r = (yield from self._g_exec(env_id, service, ["sh", "-c", JOIN_PARTS, "sh", target_path,
                                            f"{mode & 0o7777:o}", f"{uid}:{gid}", *parts], timeout_sec=600))
        finally:
            if parts:
                try:
                    (yield from self._g_exec(env_id, service, ["rm", "-f", "--", *parts], timeout_sec=60))
                except DenvError:
                    pass  # the join removed them, or the environment is gone
        if r.exit_code != 0:
            raise DenvError("PUT", f"/v1/envs/{env_id}/files", 502,
                            f"env.put: joining {len(parts)} parts into {target_path}: {r.stderr.strip()[:500]}")

    def _g_put_file(self, env_id: str, service: str, source: str | os.PathLike[str], target_path: str,
                 owner: str | None = None) -> _Op[None]:
        src = Path(source)
        data = src.read_bytes()
        if owner is None:
            (yield from self._g_put_bytes(env_id, service, target_path, data, mode=src.stat().st_mode & 0o7777))
            return
        parent, base = self._split(target_path)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            info = tarfile.TarInfo(base)
            info.size = len(data)
            info.mode = src.stat().st_mode & 0o7777
            info.mtime = int(time.time())
            tf.addfile(info, io.BytesIO(data))
        (yield from self._g_put_tar(env_id, service, parent, buf.getvalue(), owner=owner))

    def _g_put_dir(self, env_id: str, service: str, source_dir: str | os.PathLike[str], target_dir: str,
                owner: str | None = None) -> _Op[None]:
        """Upload the contents of ``source_dir`` into ``target_dir`` (not the directory itself);
        ``owner`` as for ``put_tar``."""
        src = Path(source_dir)
        if not src.is_dir():
            raise NotADirectoryError(f"denv: {src} is not a directory")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for child in sorted(src.iterdir()):
                tf.add(child, arcname=child.name, recursive=True)
        (yield from self._g_put_tar(env_id, service, str(target_dir), buf.getvalue(), owner=owner))

    def _g_get_bytes(self, env_id: str, service: str, source_path: str) -> _Op[bytes]:
        """The contents of the file at ``source_path``, a symbolic link followed.

        Raises what ``open()`` would: ``FileNotFoundError``, ``IsADirectoryError``,
        ``NotADirectoryError`` (a file on the way), ``PermissionError``. The read
        is root's (``docker cp``), so a file's mode bits do not stop it."""
        path = str(source_path)
        for _ in range(MAX_SYMLINKS):
            try:
                data = (yield from self._g_get_tar(env_id, service, path))
            except DenvError as e:
                if e.status == 413 or "larger than" in e.message.lower():
                    return (yield from self._g_get_parts(env_id, service, path, (yield from self._g_file_size(env_id, service, path))))
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

    def _g_get_parts(self, env_id: str, service: str, path: str, size: int) -> _Op[bytes]:
        """The ``size`` bytes of the regular file at ``path``, read in parts of
        ``PART_MAX`` (each cut by ``dd`` into /tmp and fetched as its own archive),
        for a file whose one archive would be over the API's 32 MiB."""
        tag = os.urandom(16).hex()
        step = PART_MAX >> 20
        out = bytearray()
        for i in range(0, max(size, 1), PART_MAX):
            part = f"{PART_DIR}/{PART_NAME}{tag}.{i // PART_MAX}"
            try:
                r = (yield from self._g_exec(env_id, service, ["sh", "-c", CUT_PART, "sh", path, part,
                                                str(i // PART_MAX * step), str(step)], timeout_sec=600))
                if r.exit_code != 0:
                    raise DenvError("GET", f"/v1/envs/{env_id}/files", 502,
                                    f"env.get: cutting {path} at {i}: {r.stderr.strip()[:500]}")
                with tarfile.open(fileobj=io.BytesIO((yield from self._g_get_tar(env_id, service, part))), mode="r:*") as tf:
                    m = tf.next()
                    f = tf.extractfile(m) if m is not None else None
                    out += f.read() if f is not None else b""
            finally:
                (yield from self._g_exec(env_id, service, ["rm", "-f", "--", part], timeout_sec=60))
        return bytes(out)

    def _g_file_size(self, env_id: str, service: str, path: str) -> _Op[int]:
        r = (yield from self._g_exec(env_id, service, ["sh", "-c", 'wc -c <"$1"', "sh", path], timeout_sec=60))
        try:
            return int(r.stdout.strip())
        except ValueError:
            raise DenvError("GET", f"/v1/envs/{env_id}/files", 502,
                            f"env.get: size of {path}: {r.stderr.strip()[:500]}") from None

    def _g_get_file(self, env_id: str, service: str, source_path: str, target: str | os.PathLike[str]) -> _Op[None]:
        data = (yield from self._g_get_bytes(env_id, service, source_path))
        dst = Path(target)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)

    def _g_get_dir(self, env_id: str, service: str, source_dir: str, target_dir: str | os.PathLike[str]) -> _Op[None]:
        """Extract the contents of ``source_dir`` under ``target_dir`` (``docker cp src/.``)."""
        data = (yield from self._g_get_tar(env_id, service, source_dir))
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

    if TYPE_CHECKING:
        # Each operation under its public name (see _Operation; a test checks
        # that this list is every _g_ method).
        deployment = _Operation(_g_deployment)
        wait_deployment = _Operation(_g_wait_deployment)
        ensure_project = _Operation(_g_ensure_project)
        upload_context = _Operation(_g_upload_context)
        pack_contexts = _Operation(_g_pack_contexts)
        deploy = _Operation(_g_deploy)
        sandbox = _Operation(_g_sandbox)
        _build_sandbox = _Operation(_g__build_sandbox)
        batch = _Operation(_g_batch)
        batch_status = _Operation(_g_batch_status)
        wait_batch = _Operation(_g_wait_batch)
        metrics = _Operation(_g_metrics)
        logs = _Operation(_g_logs)
        touch = _Operation(_g_touch)
        set_ttl = _Operation(_g_set_ttl)
        pause = _Operation(_g_pause)
        resume = _Operation(_g_resume)
        environment = _Operation(_g_environment)
        destroy = _Operation(_g_destroy)
        current_version = _Operation(_g_current_version)
        snapshot = _Operation(_g_snapshot)
        fork = _Operation(_g_fork)
        verify = _Operation(_g_verify)
        exec = _Operation(_g_exec)
        start_command = _Operation(_g_start_command)
        commands = _Operation(_g_commands)
        command = _Operation(_g_command)
        command_output = _Operation(_g_command_output)
        wait_command = _Operation(_g_wait_command)
        signal_command = _Operation(_g_signal_command)
        kill_command = _Operation(_g_kill_command)
        put_tar = _Operation(_g_put_tar)
        get_tar = _Operation(_g_get_tar)
        put_bytes = _Operation(_g_put_bytes)
        _put_parts = _Operation(_g__put_parts)
        put_file = _Operation(_g_put_file)
        put_dir = _Operation(_g_put_dir)
        get_bytes = _Operation(_g_get_bytes)
        get_parts = _Operation(_g_get_parts)
        file_size = _Operation(_g_file_size)
        get_file = _Operation(_g_get_file)
        get_dir = _Operation(_g_get_dir)


class Client(_Ops):
    """A client of one control plane, authenticated by a team API key."""

    def __init__(
        self,
        server: str | None = None,
        api_key: str | None = None,
        timeout: float = 900.0,
    ) -> None:
        key = self._setup(server, api_key, timeout)
        self._http = httpx.Client(base_url=self.server, headers=_headers(key), timeout=timeout, trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transport ----

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """One request (keywords: json, params, content, headers, timeout,
        idempotency_key); a refusal raises DenvError."""
        args = _http_args(method, self.timeout, kw)
        with _transport(method, path, args["timeout"], self.server):
            r = self._http.request(url=path, **args)
        return _answer(method, path, r)

    def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        return _doc(method, path, self._request(method, path, **kw))

    def _run(self, op: _Op[T]) -> T:
        """Run an operation to its end: send each request it yields, sleep its pauses."""
        value: Any = None
        error: BaseException | None = None
        while not isinstance(step := _step(op, value, error), _Done):
            value, error = None, None
            try:
                if isinstance(step, _Sleep):
                    time.sleep(step.sec)
                else:
                    value = (self._json if step.as_json else self._request)(step.method, step.path, **step.kw)
            except DenvError as e:
                error = e
        return cast(T, step.value)


class AsyncClient(_Ops):
    """``Client``'s methods as coroutines, on httpx.AsyncClient: many
    sandboxes at once on one event loop. Use ``async with`` or ``aclose()``."""

    def __init__(
        self,
        server: str | None = None,
        api_key: str | None = None,
        timeout: float = 900.0,
    ) -> None:
        key = self._setup(server, api_key, timeout)
        self._http = httpx.AsyncClient(base_url=self.server, headers=_headers(key), timeout=timeout,
                                       trust_env=False)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        args = _http_args(method, self.timeout, kw)
        with _transport(method, path, args["timeout"], self.server):
            r = await self._http.request(url=path, **args)
        return _answer(method, path, r)

    async def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        return _doc(method, path, await self._request(method, path, **kw))

    async def _run(self, op: _Op[T]) -> T:
        """Client._run, awaiting each request and pause."""
        value: Any = None
        error: BaseException | None = None
        while not isinstance(step := _step(op, value, error), _Done):
            value, error = None, None
            try:
                if isinstance(step, _Sleep):
                    await asyncio.sleep(step.sec)
                else:
                    value = await (self._json if step.as_json else self._request)(step.method, step.path, **step.kw)
            except DenvError as e:
                error = e
        return cast(T, step.value)


def _sync(gen: Callable[..., _Op[Any]]) -> Callable[..., Any]:
    @functools.wraps(gen)
    def call(self: Client, *args: Any, **kw: Any) -> Any:
        return self._run(gen(self, *args, **kw))
    return call


def _async(gen: Callable[..., _Op[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(gen)
    async def call(self: AsyncClient, *args: Any, **kw: Any) -> Any:
        return await self._run(gen(self, *args, **kw))
    return call


# Each operation under its public name, on both clients.
for _name in [n for n in vars(_Ops) if n.startswith("_g_")]:
    _gen = getattr(_Ops, _name)
    for _cls, _wrap in ((Client, _sync), (AsyncClient, _async)):
        _f = _wrap(_gen)
        _f.__name__ = _f.__qualname__ = _name[3:]
        # The caller gets the operation's result, not the generator.
        _ret = re.sub(r"^_Op\[(.*)\]$", r"\1", str(_gen.__annotations__.get("return", "Any")))
        _f.__annotations__ = {**_gen.__annotations__, "return": _ret}
        setattr(_f, "__signature__", inspect.signature(_gen).replace(return_annotation=_ret))
        setattr(_cls, _name[3:], _f)
del _name, _gen, _cls, _wrap, _f, _ret
