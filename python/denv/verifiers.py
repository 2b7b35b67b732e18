"""denv sandboxes for Prime Intellect's ``verifiers``, through the ``prime-sandboxes`` surface.

``DenvSandboxClient`` and ``AsyncDenvSandboxClient`` answer the methods of
``prime_sandboxes.SandboxClient`` and ``AsyncSandboxClient`` (the same names,
arguments, return models and exceptions) with denv sandboxes: ``create`` is
``POST /v1/sandboxes``, a checkpoint is a denv version (``checkpoint``
snapshots, ``CreateSandboxRequest(checkpoint_id=...)`` forks), commands run
through ``POST /v1/envs/{id}/exec`` and files move as tar archives.

verifiers 0.4 provisions its boxes as *runtimes* (``verifiers.v1.runtimes``);
its ``prime`` runtime builds Prime's client itself and its runtime types are a
closed list, so the way in without patching verifiers is a live box handed to
``Agent.run(task, runtime=...)``: ``DenvRuntime`` is that box on denv.

Differences from Prime, by design of denv:
- egress is decided at create and is all or nothing: the client's ``egress``
  (``deny`` by default, where Prime allows) when the request lists no hosts,
  none when it does; ``set_network`` cannot change it later and raises
  ``APIError``.
- labels live in this client (denv environments carry none): ``list`` and
  ``bulk_delete`` by label see only the sandboxes this client made.
- ``cpu_cores``, ``memory_gb``, ``disk_size_gb``, GPUs, timeouts, regions and
  LAN networks are not applied; a sandbox lives until deleted.
"""

from __future__ import annotations

import asyncio
import functools
import posixpath
import shlex
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar, Dict, List, Literal, Optional

from prime_sandboxes import (
    APIError,
    BackgroundJob,
    BackgroundJobStatus,
    BackgroundJobStatusSnapshot,
    BatchSandboxStatusResponse,
    BulkDeleteSandboxResponse,
    CommandResponse,
    CommandTimeoutError,
    CreateSandboxRequest,
    FileUploadResponse,
    ReadFileResponse,
    Sandbox,
    SandboxCheckpoint,
    SandboxFileNotFoundError,
    SandboxListResponse,
    SandboxNotRunningError,
    SandboxStatus,
    SandboxStatusSnapshot,
)

from denv.client import Client, DenvError, DenvTimeout, shell_command

# The service of an image sandbox (POST /v1/sandboxes names its one container so).
DEFAULT_SERVICE = "main"
# What an image sandbox runs when the request gives no start command (Prime keeps
# a sandbox up the same way).
IDLE_COMMAND = ["sleep", "infinity"]
# execute_command's timeout when the caller gives none (the API's default is 120 s).
DEFAULT_EXEC_TIMEOUT = 300
# Where background jobs keep their output and exit code inside the sandbox.
JOB_DIR = "/tmp/.denv-jobs"
# Prime's API takes at most this many ids in one batch call.
MAX_BATCH_IDS = 100
# denv-cp says running; the spec's documents (and the unit tests' fake) say healthy.
STATUS_OF = {
    "running": SandboxStatus.RUNNING,
    "healthy": SandboxStatus.RUNNING,
    "pending": SandboxStatus.PENDING,
    "failed": SandboxStatus.ERROR,
    "destroyed": SandboxStatus.TERMINATED,
}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _when(value: Any) -> datetime:
    """An API time (RFC 3339 text) as a datetime; now when absent or unreadable."""
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
    return _now()


class DenvSandboxClient:
    """``prime_sandboxes.SandboxClient``'s methods on denv sandboxes (synchronous).

    ``from_version`` makes every ``create`` a fork of that version in place of
    the request's image (a request's ``checkpoint_id`` still wins). ``egress``
    (``deny`` or ``allow``) applies when the request lists no hosts; a request
    with host lists gets no egress, denv not filtering by host. ``service`` is the
    container commands and files go to (``main`` for image sandboxes; a
    version's agent service for forks of a multi-service world)."""

    def __init__(
        self,
        client: Client | Any = None,
        *,
        server: str | None = None,
        api_key: str | None = None,
        from_version: str | None = None,
        service: str = DEFAULT_SERVICE,
        egress: str = "deny",
        project: str | None = None,
        volumes: List[str] | None = None,
        create_timeout_sec: int = 600,
    ) -> None:
        if not isinstance(client, Client):
            # Prime's own first argument (an APIClient, or an API key for the async
            # client) means nothing to denv: DENV_SERVER and DENV_API_KEY are used.
            client = None
        self._owns_client = client is None  # close only a client made here
        self.client = client or Client(server=server, api_key=api_key)
        self.from_version = from_version
        self.service = service
        self.egress = egress
        self.project = project
        self.volumes = volumes
        self.create_timeout_sec = create_timeout_sec
        self._made: dict[str, tuple[CreateSandboxRequest, datetime]] = {}

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> "DenvSandboxClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- lifecycle ----

    def _egress_of(self, request: CreateSandboxRequest) -> str:
        """The client's egress unless the request filters hosts, which denv cannot: then none."""
        if request.network_allowlist is None and request.network_denylist is None:
            return self.egress
        return "deny"

    def create(self, request: CreateSandboxRequest) -> Sandbox:
        """Create a sandbox and return it running (denv answers when it is healthy)."""
        # The client's version stands in for the image the caller's code names.
        version = request.checkpoint_id or self.from_version
        try:
            if version:
                sbx = self.client.sandbox(from_version=version, name=request.name,
                                          egress=self._egress_of(request), timeout_sec=self.create_timeout_sec)
            else:
                cmd = IDLE_COMMAND
                if request.start_command is not None:
                    cmd = [request.start_command.executable, *request.start_command.args]
                sbx = self.client.sandbox(
                    image=request.docker_image, cmd=cmd, env=request.environment_vars or None,
                    egress=self._egress_of(request), volumes=self.volumes, name=request.name,
                    project=self.project, timeout_sec=self.create_timeout_sec,
                )
        except DenvError as e:
            raise APIError(f"denv: create {request.name}: {e}") from e
        self._made[sbx.id] = (request, _now())
        return self._model(sbx.raw)

    def _model(self, env: Dict[str, Any]) -> Sandbox:
        """A Prime ``Sandbox`` for a denv environment object."""
        env_id = str(env.get("ID", ""))
        request, made = self._made.get(env_id, (None, None))
        image = request.docker_image if request and request.docker_image else ""
        if not image:
            image = str(env.get("ParentVersionID") or env.get("CurrentVersionID") or "")
        return Sandbox(
            id=env_id,
            name=str(env.get("Name") or (request.name if request else env_id)),
            docker_image=image,
            start_command=request.start_command if request else None,
            cpu_cores=request.cpu_cores if request else 1.0,
            memory_gb=request.memory_gb if request else 1.0,
            disk_size_gb=(request.disk_size_gb if request and request.disk_size_gb else 0.0),
            disk_mount_path="/work",
            gpu_count=0,
            status=STATUS_OF.get(str(env.get("Status", "")), SandboxStatus.PENDING).value,
            timeout_minutes=request.timeout_minutes if request else 0,
            environment_vars=request.environment_vars if request else None,
            labels=list(request.labels) if request else [],
            created_at=_when(env.get("CreatedAt")) if env.get("CreatedAt") else (made or _now()),
            updated_at=_now(),
        )

    def _env(self, sandbox_id: str) -> Dict[str, Any]:
        try:
            return self.client.environment(sandbox_id)
        except DenvError as e:
            if e.status == 404:
                raise APIError(f"denv: no sandbox {sandbox_id}") from e
            raise APIError(f"denv: {e}") from e

    def get(self, sandbox_id: str) -> Sandbox:
        return self._model(self._env(sandbox_id))

    def list(
        self,
        team_id: Optional[str] = None,
        status: Optional[str] = None,
        labels: Optional[List[str]] = None,
        page: int = 1,
        per_page: int = 50,
        exclude_terminated: Optional[bool] = None,
        user_id: Optional[str] = None,
    ) -> SandboxListResponse:
        """The project's sandboxes (``GET /v1/projects/{project}/envs``), newest first."""
        project = self.project or "sandboxes"
        try:
            doc = self.client._json("GET", f"/v1/projects/{project}/envs")
        except DenvError as e:
            if e.status != 404:
                raise APIError(f"denv: {e}") from e
            doc = {}
        rows = [self._model(env) for env in doc.get("environments") or []]
        if status:
            rows = [s for s in rows if s.status == str(status).upper()]
        if exclude_terminated:
            rows = [s for s in rows if s.status != SandboxStatus.TERMINATED.value]
        if labels:
            rows = [s for s in rows if set(labels) <= set(s.labels)]
        rows.sort(key=lambda s: s.created_at, reverse=True)
        start = max(0, (page - 1) * per_page)
        return SandboxListResponse(sandboxes=rows[start:start + per_page], total=len(rows), page=page,
                                   per_page=per_page, has_next=start + per_page < len(rows))

    def delete(self, sandbox_id: str) -> Dict[str, Any]:
        """Destroy the sandbox; returns when denv's destroy deployment is final."""
        try:
            self.client.destroy(sandbox_id)
        except DenvError as e:
            raise APIError(f"denv: delete {sandbox_id}: {e}") from e
        self._made.pop(sandbox_id, None)
        return {"success": True, "sandbox_id": sandbox_id}

    def bulk_delete(
        self,
        sandbox_ids: Optional[List[str]] = None,
        labels: Optional[List[str]] = None,
        team_id: Optional[str] = None,
        user_id: Optional[str] = None,
        all_users: bool = False,
    ) -> BulkDeleteSandboxResponse:
        if not sandbox_ids and not labels:
            raise ValueError("Must specify either sandbox_ids or labels")
        ids = list(sandbox_ids or [])
        if labels:
            ids += [i for i, (r, _) in self._made.items() if set(labels) <= set(r.labels) and i not in ids]
        ok: list[str] = []
        failed: list[dict[str, str]] = []
        for i in ids:
            try:
                self.delete(i)
                ok.append(i)
            except APIError as e:
                failed.append({"sandbox_id": i, "error": str(e)})
        return BulkDeleteSandboxResponse(succeeded=ok, failed=failed,
                                         message=f"deleted {len(ok)} of {len(ids)} sandboxes")

    def get_sandbox_statuses(self, sandbox_ids: List[str]) -> BatchSandboxStatusResponse:
        if len(sandbox_ids) > MAX_BATCH_IDS:
            raise ValueError(f"at most {MAX_BATCH_IDS} sandbox ids per call")
        statuses, errors = [], []
        for i in sandbox_ids:
            try:
                statuses.append(SandboxStatusSnapshot(sandbox_id=i, status=SandboxStatus(self.get(i).status)))
            except APIError as e:
                errors.append({"sandbox_id": i, "error": str(e)})
        return BatchSandboxStatusResponse(statuses=statuses, errors=errors)

    def wait_for_creation(
        self,
        sandbox_id: str,
        max_attempts: int = 60,
        stability_checks: int = 1,
        image_build_timeout_seconds: int = 3000,
    ) -> None:
        """Return once the sandbox runs; ``SandboxNotRunningError`` when it failed or is gone."""
        for attempt in range(max(1, max_attempts)):
            status = self.get(sandbox_id).status
            if status == SandboxStatus.RUNNING.value:
                return
            if status in (SandboxStatus.ERROR.value, SandboxStatus.TERMINATED.value):
                raise SandboxNotRunningError(sandbox_id, status)
            time.sleep(min(2.0, 0.2 * (attempt + 1)))
        raise SandboxNotRunningError(sandbox_id, status, message=f"Sandbox {sandbox_id} not running "
                                     f"after {max_attempts} attempts (status={status})")

    def bulk_wait_for_creation(
        self,
        sandbox_ids: List[str],
        max_attempts: int = 60,
        image_build_timeout_seconds: int = 3000,
    ) -> Dict[str, str]:
        for i in sandbox_ids:
            self.wait_for_creation(i, max_attempts=max_attempts)
        return {i: SandboxStatus.RUNNING.value for i in sandbox_ids}

    def get_logs(self, sandbox_id: str) -> str:
        """The environment's events, oldest first, one ``kind: body`` line each."""
        try:
            doc = self.client._json("GET", "/v1/events", params={"subject": f"env:{sandbox_id}"})
        except DenvError as e:
            raise APIError(f"denv: {e}") from e
        events = list(reversed(doc.get("events") or []))
        return "".join(f"{ev.get('Kind', '')}: {ev.get('Body', '')}\n" for ev in events)

    # ---- checkpoints are denv versions ----

    def checkpoint(self, sandbox_id: str) -> SandboxCheckpoint:
        """Snapshot the sandbox's live state; the version is the checkpoint (ready at once)."""
        try:
            version = self.client.snapshot(sandbox_id)
        except DenvError as e:
            raise APIError(f"denv: checkpoint {sandbox_id}: {e}") from e
        now = _now()
        return SandboxCheckpoint(id=version, sandbox_id=sandbox_id, state="READY", depth=0,
                                 docker_image=self.get(sandbox_id).docker_image, created_at=now, updated_at=now)

    def wait_for_checkpoint(self, checkpoint_id: str, *args: Any, **kwargs: Any) -> None:
        """A denv snapshot is final when ``checkpoint`` returns: nothing to wait for."""

    def set_network(self, sandbox_id: str, *, allow: Optional[List[str]] = None,
                    deny: Optional[List[str]] = None) -> Any:
        raise APIError("denv: a sandbox's egress is fixed when it is created "
                       "(network_allowlist=['*'] allows it, anything else denies it)")

    # ---- commands ----

    def _argv(self, command: str, working_dir: Optional[str], env: Optional[Dict[str, str]],
              user: Optional[str]) -> List[str]:
        return shell_command(command, cwd=working_dir, env=env, user=user)

    def _exec(self, sandbox_id: str, argv: List[str], timeout: int, command: str) -> CommandResponse:
        try:
            r = self.client.exec(sandbox_id, self.service, argv, timeout_sec=timeout)
        except DenvTimeout:
            raise CommandTimeoutError(sandbox_id, command, timeout) from None
        except DenvError as e:
            if e.status in (404, 409):
                raise SandboxNotRunningError(sandbox_id, command=command, message=str(e)) from e
            raise APIError(f"denv: {e}") from e
        return CommandResponse(stdout=r.stdout, stderr=r.stderr, exit_code=r.exit_code)

    def execute_command(
        self,
        sandbox_id: str,
        command: str,
        working_dir: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        timeout: Optional[int] = None,
        user: Optional[str] = None,
    ) -> CommandResponse:
        """Run a shell command line; a non-zero exit is a result, not an error."""
        t = int(timeout or DEFAULT_EXEC_TIMEOUT)
        return self._exec(sandbox_id, self._argv(command, working_dir, env, user), t, command)

    def start_background_job(
        self,
        sandbox_id: str,
        command: str,
        working_dir: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        user: Optional[str] = None,
    ) -> BackgroundJob:
        """Start ``command`` detached; its output and exit code land in files under JOB_DIR."""
        job_id = uuid.uuid4().hex[:16]
        base = f"{JOB_DIR}/{job_id}"
        job = BackgroundJob(job_id=job_id, sandbox_id=sandbox_id, stdout_log_file=f"{base}.out",
                            stderr_log_file=f"{base}.err", exit_file=f"{base}.exit")
        # A script file, so no quoting of the command line; the exit file appears
        # whole (rename) only once both logs are closed.
        script = (f"{shlex.join(self._argv(command, working_dir, env, user))} "
                  f">{job.stdout_log_file} 2>{job.stderr_log_file} </dev/null\n"
                  f"echo $? >{base}.tmp && mv {base}.tmp {job.exit_file}\n")
        try:
            self.client.put_bytes(sandbox_id, self.service, f"{base}.sh", script.encode(), mode=0o700)
        except DenvError as e:
            raise APIError(f"denv: background job did not start: {e}") from e
        # No tty, so no SIGHUP when the exec ends: the job outlives it as the
        # container's orphan (nohup is not in every image).
        r = self._exec(sandbox_id, ["sh", "-c", f"sh {base}.sh >/dev/null 2>&1 </dev/null &"],
                       DEFAULT_EXEC_TIMEOUT, command)
        if r.exit_code != 0:
            raise APIError(f"denv: background job did not start: {r.stderr.strip()}")
        return job

    def _exit_code(self, job: BackgroundJob) -> Optional[int]:
        try:
            text = self.client.get_bytes(job.sandbox_id, self.service, job.exit_file).decode().strip()
        except FileNotFoundError:
            return None
        except DenvError as e:
            raise APIError(f"denv: {e}") from e
        return int(text) if text.lstrip("-").isdigit() else None

    def get_background_job_status(self, sandbox_id: str, job: BackgroundJob,
                                  timeout: Optional[int] = None) -> BackgroundJobStatusSnapshot:
        code = self._exit_code(job)
        return BackgroundJobStatusSnapshot(sandbox_id=sandbox_id, job_id=job.job_id,
                                           completed=code is not None, exit_code=code)

    def get_background_job(self, sandbox_id: str, job: BackgroundJob,
                           timeout: Optional[int] = None) -> BackgroundJobStatus:
        """The job's state; once completed, its whole stdout and stderr (read as files)."""
        code = self._exit_code(job)
        if code is None:
            return BackgroundJobStatus(job_id=job.job_id, completed=False)
        out: dict[str, Any] = {}
        for name, path in (("stdout", job.stdout_log_file), ("stderr", job.stderr_log_file)):
            try:
                out[name] = self.client.get_bytes(sandbox_id, self.service, path).decode(errors="replace")
            except (OSError, DenvError) as e:
                out[f"{name}_error"] = str(e)
        return BackgroundJobStatus(job_id=job.job_id, completed=True, exit_code=code, **out)

    def run_background_job(
        self,
        sandbox_id: str,
        command: str,
        timeout: int = 900,
        working_dir: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        poll_interval: int = 3,
    ) -> BackgroundJobStatus:
        job = self.start_background_job(sandbox_id, command, working_dir=working_dir, env=env)
        deadline = time.monotonic() + timeout
        while True:
            status = self.get_background_job(sandbox_id, job)
            if status.completed:
                return status
            if time.monotonic() >= deadline:
                raise CommandTimeoutError(sandbox_id, command, timeout)
            time.sleep(min(poll_interval, max(0.05, deadline - time.monotonic())))

    # ---- files ----

    def upload_bytes(self, sandbox_id: str, file_path: str, file_bytes: bytes, filename: str,
                     timeout: Optional[int] = None) -> FileUploadResponse:
        """Write ``file_bytes`` to ``file_path`` (parents made); ``filename`` is Prime's form name."""
        try:
            self.client.put_bytes(sandbox_id, self.service, file_path, bytes(file_bytes))
        except DenvError as e:
            raise APIError(f"denv: upload {file_path}: {e}") from e
        return FileUploadResponse(success=True, path=file_path, size=len(file_bytes), timestamp=_now())

    def upload_file(self, sandbox_id: str, file_path: str, local_file_path: str,
                    timeout: Optional[int] = None) -> FileUploadResponse:
        data = Path(local_file_path).read_bytes()
        return self.upload_bytes(sandbox_id, file_path, data, Path(local_file_path).name, timeout)

    def _read(self, sandbox_id: str, file_path: str) -> bytes:
        try:
            return self.client.get_bytes(sandbox_id, self.service, file_path)
        except FileNotFoundError as e:
            raise SandboxFileNotFoundError(f"File not found: {file_path}") from e
        except DenvError as e:
            raise APIError(f"denv: download {file_path}: {e}") from e

    def download_file(self, sandbox_id: str, file_path: str, local_file_path: str,
                      timeout: Optional[int] = None) -> None:
        data = self._read(sandbox_id, file_path)
        dst = Path(local_file_path)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)

    def read_file(self, sandbox_id: str, file_path: str, timeout: Optional[int] = None,
                  offset: Optional[int] = None, length: Optional[int] = None) -> ReadFileResponse:
        data = self._read(sandbox_id, file_path)
        start = offset or 0
        window = data[start:] if length is None else data[start:start + length]
        return ReadFileResponse(content=window.decode(errors="replace"), size=len(window), total_size=len(data),
                                offset=start, truncated=start + len(window) < len(data))


# Every public method of the sync client, run off the event loop by the async one.
_ASYNC_METHODS = (
    "create", "get", "list", "delete", "bulk_delete", "get_sandbox_statuses", "wait_for_creation",
    "bulk_wait_for_creation", "get_logs", "checkpoint", "wait_for_checkpoint", "set_network",
    "execute_command", "start_background_job", "get_background_job", "get_background_job_status",
    "run_background_job", "upload_bytes", "upload_file", "download_file", "read_file",
)


def _off_loop(name: str) -> Any:
    sync = getattr(DenvSandboxClient, name)

    @functools.wraps(sync)
    async def method(self: "AsyncDenvSandboxClient", *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(sync, self.sync, *args, **kwargs)

    return method


class AsyncDenvSandboxClient:
    """``prime_sandboxes.AsyncSandboxClient``'s methods on denv sandboxes.

    Takes the same arguments as ``DenvSandboxClient``; Prime's tuning keywords
    (``max_connections``, ``background_job_output_concurrency``, ...) are
    accepted and ignored, so code that builds Prime's client builds this one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        for k in ("max_connections", "max_keepalive_connections", "background_job_output_concurrency",
                  "background_job_output_queue_size", "background_job_output_cache_bytes"):
            kwargs.pop(k, None)
        self.sync = DenvSandboxClient(*args, **kwargs)

    async def aclose(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> "AsyncDenvSandboxClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    if TYPE_CHECKING:
        # The methods of _ASYNC_METHODS are set on the class below, one
        # wrapper each; this tells a type checker they are there.
        def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]: ...


for _name in _ASYNC_METHODS:
    setattr(AsyncDenvSandboxClient, _name, _off_loop(_name))


# ---- verifiers' runtime ----

try:
    from verifiers.v1.configs.runtime import NetworkPolicyConfig as _PolicyBase
    from verifiers.v1.errors import SandboxError
    from verifiers.v1.runtimes.base import BaseRuntimeInfo, ProgramResult, Runtime
except ImportError:  # prime-sandboxes without verifiers: the clients still work
    Runtime = None

if Runtime is not None:

    class DenvConfig(_PolicyBase):
        """A denv box for verifiers: an image sandbox or a fork of a version."""

        type: Literal["denv"] = "denv"
        image: str = "python:3.11-slim"
        """Image of an image sandbox (unused with ``from_version``)."""
        from_version: str | None = None
        """Fork this healthy denv version (its whole stack, data included) instead."""
        service: str = DEFAULT_SERVICE
        """The service commands and files go to."""
        workdir: str = "/app"
        """Working directory of commands (made at start)."""

    class DenvRuntimeInfo(DenvConfig, BaseRuntimeInfo):
        pass

    class DenvRuntime(Runtime):
        """verifiers' runtime contract on a denv sandbox, hand it to ``Agent.run(task, runtime=...)``.

        Egress follows ``config.allow``: ``["*"]`` with no ``block`` allows it,
        anything narrower denies all of it (denv fixes egress at create)."""

        supports_user: ClassVar[bool] = True
        is_local: ClassVar[bool] = False

        def __init__(self, config: DenvConfig | None = None, name: str | None = None,
                     client: Client | None = None) -> None:
            super().__init__(name)
            self.config = config or DenvConfig()
            self.info = DenvRuntimeInfo(**self.config.model_dump())
            self._client = AsyncDenvSandboxClient(client, service=self.config.service)

        async def start(self) -> None:
            open_ = self.config.allow == ["*"] and not self.config.block
            self._client.sync.egress = "allow" if open_ else "deny"
            request = CreateSandboxRequest(
                name=self.name,
                docker_image=None if self.config.from_version else self.config.image,
                checkpoint_id=self.config.from_version,
                environment_vars=self.env or None,
            )
            try:
                sandbox = await self._client.create(request)
                self.info.id = sandbox.id
                await self._client.wait_for_creation(sandbox.id)
                r = await self._client.execute_command(sandbox.id, f"mkdir -p {shlex.quote(self.config.workdir)}")
            except Exception as e:  # one rollout's problem, as for verifiers' own runtimes
                raise SandboxError(f"denv sandbox provisioning failed: {e}") from e
            if r.exit_code != 0:
                raise SandboxError(f"denv: cannot make {self.config.workdir}: {r.stderr.strip()}")

        async def run(self, argv: list[str], env: dict[str, str]) -> ProgramResult:
            if self.info.id is None:
                raise SandboxError("denv runtime is not started")
            try:
                r = await self._client.execute_command(
                    self.info.id, shlex.join(argv), working_dir=self.config.workdir,
                    env=self.process_env(env), user=self.user,
                )
            except Exception as e:
                raise SandboxError(f"denv exec failed: {e}") from e
            return ProgramResult(exit_code=r.exit_code, stdout=r.stdout, stderr=r.stderr)

        def _path(self, path: str) -> str:
            return path if path.startswith("/") else posixpath.join(self.config.workdir, path)

        async def _read(self, path: str, max_bytes: int | None = None) -> bytes:
            if max_bytes is None and self.user is None:
                return await self._fetch(path, self._path(path))
            # Bounded at the source, and as the user: head copies at most max_bytes
            # to a staging file, which then moves as a file (no 1 MiB exec cap).
            staged = f"/tmp/.denv-read-{uuid.uuid4().hex}"
            limit = str(max_bytes) if max_bytes is not None else str(1 << 62)
            r = await self.run(["sh", "-c", 'head -c "$1" -- "$2" > "$3"', "sh", limit, path, staged], {})
            try:
                if r.exit_code != 0:
                    raise SandboxError(f"read {path!r}: {r.stderr.strip()[-500:]}")
                return await self._fetch(path, staged)
            finally:
                await self.with_user(None).run(["rm", "-f", staged], {})

        async def _fetch(self, path: str, where: str) -> bytes:
            try:
                return await asyncio.to_thread(self._client.sync.client.get_bytes, self.info.id,
                                               self.config.service, where)
            except Exception as e:
                raise SandboxError(f"read {path!r}: {e}") from e

        async def _upload(self, path: str, where: str, data: bytes) -> None:
            try:
                await self._client.upload_bytes(self.info.id, where, data, filename=posixpath.basename(where))
            except Exception as e:
                raise SandboxError(f"write {path!r}: {e}") from e

        async def write(self, path: str, data: bytes) -> None:
            if self.user is None:
                return await self._upload(path, self._path(path), data)
            # Files move as root: stage the bytes, then copy them in as the user, so
            # the user's permissions decide (as verifiers' prime runtime does).
            staged = f"/tmp/.denv-write-{uuid.uuid4().hex}"
            root = self.with_user(None)
            try:
                await self._upload(path, staged, data)
                await root.run(["chmod", "644", staged], {})
                copy = 'mkdir -p "$(dirname "$1")" && cat -- "$2" > "$1"'
                r = await self.run(["sh", "-c", copy, "sh", self._path(path), staged], {})
            finally:
                await root.run(["rm", "-f", staged], {})
            if r.exit_code != 0:
                raise SandboxError(f"write {path!r}: {r.stderr.strip()[-500:]}")

        async def expose(self, port: int) -> str:
            raise SandboxError("denv runtime: publish ports in the version's compose (x-denv) instead")

        def cleanup(self) -> None:
            # The atexit backstop and teardown's body: destroy once, keep info.id for the record.
            if self.info.id is not None and not getattr(self, "_destroyed", False):
                self._destroyed = True
                try:
                    self._client.sync.delete(self.info.id)
                except APIError:
                    pass

    __all_runtime__ = ["DenvConfig", "DenvRuntime", "DenvRuntimeInfo"]
else:
    __all_runtime__ = []

__all__ = ["AsyncDenvSandboxClient", "DenvSandboxClient", *__all_runtime__]
