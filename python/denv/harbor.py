"""Harbor backend: ``harbor run ... -e denv.harbor:DenvEnvironment``.

A task with ``environment/docker-compose.yaml`` (or ``.yml``) is deployed as the
environment ``harbor-<session>`` of the project ``sandboxes``; a task with
``[environment] docker_image`` becomes one sandbox from that image; a task with
only ``environment/Dockerfile`` is built on the target host (a one-service
compose file with ``build:``). The agent, the oracle and a shared verifier all
run in service ``main``. A separate verifier (``[verifier] environment_mode =
"separate"``) is a second DenvEnvironment that Harbor itself creates from
``tests/`` after the agent's environment is stopped: it is its own denv
environment, built from ``tests/Dockerfile`` with the tests inside the image.

Attempts of one task (``-k N``) fork the version the first attempt prepared,
keyed on the task's digest, instead of deploying (and building) again.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import threading
from pathlib import Path
from typing import Any

import yaml

try:
    from harbor.environments.base import BaseEnvironment, ExecResult
    from harbor.environments.capabilities import EnvironmentCapabilities, EnvironmentResourceCapabilities
    from harbor.environments.definition import require_agent_environment_definition
    from harbor.models.trial.config import ResourceMode
except ImportError as _e:  # pragma: no cover - depends on the Python running it
    raise ImportError(
        "denv.harbor needs Harbor 0.26 or later, which needs Python 3.12 or later: "
        "pip install 'denv[harbor]' on such a Python (on 3.11 the extra installs without Harbor)"
    ) from _e

from denv.client import Client, DenvError, Sandbox, shell_command

SERVICE = "main"
PROJECT = "sandboxes"
DEFAULT_EXEC_TIMEOUT = 600
START_TIMEOUT = 900
COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml")
LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
TASK_DIRS = ("/tests", "/solution", "/app")
PERSISTED = ("/app", "/logs")
# A built image's own command may exit; the agent needs the service to stay up.
IDLE_CMD = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"]
STORAGE_POLICIES = ("refuse", "ignore")
NAME_MAX = 63  # denv's environment names
_NAME_BAD = re.compile(r"[^A-Za-z0-9._-]+")

# task digest -> version id of the environment the first attempt prepared
# (deployed, healthy, before any agent ran); one lock per digest so that
# concurrent attempts wait for that version instead of building in parallel.
_PREPARED: dict[str, str] = {}
_PREPARED_LOCKS: dict[str, threading.Lock] = {}
_PREPARED_GUARD = threading.Lock()


class DenvRefusal(RuntimeError):
    """denv cannot run this task as asked; raised from start() so that Harbor
    records it on the trial (never from the constructor, which ends the job)."""


def env_name_for(session_id: str) -> str:
    """``harbor-<session>`` made a valid denv name (letters, digits, . _ -; 63 at most)."""
    name = "harbor-" + _NAME_BAD.sub("-", session_id).strip("-._")
    return name[:NAME_MAX].rstrip("-._") or "harbor"


def _lock_for(key: str) -> threading.Lock:
    with _PREPARED_GUARD:
        return _PREPARED_LOCKS.setdefault(key, threading.Lock())


class DenvEnvironment(BaseEnvironment):
    """A Harbor environment that runs on denv."""

    def __init__(self, environment_dir: Path, *args: Any, client: Client | None = None,
                 storage: str = "refuse", **kwargs: Any) -> None:
        env_dir = Path(environment_dir)
        # State that capabilities and _validate_definition read must exist
        # before BaseEnvironment.__init__ calls them.
        self._compose_path: Path | None = next(
            (env_dir / n for n in COMPOSE_NAMES if (env_dir / n).is_file()), None
        )
        self._client: Client | None = client
        self._env_id: str | None = None
        self._refusals: list[str] = []
        self.forked_from: str | None = None  # the prepared version this attempt forked
        if storage not in STORAGE_POLICIES:
            raise ValueError(f"denv: --ek storage={storage!r}: use one of {', '.join(STORAGE_POLICIES)}")
        self._storage_policy = storage
        super().__init__(env_dir, *args, **kwargs)

    # ---- what Harbor asks of a backend ----

    @staticmethod
    def type() -> str:
        return "denv"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True, docker_compose=True)

    @classmethod
    def resource_capabilities(cls) -> EnvironmentResourceCapabilities:
        # cpus and mem_limit are hard ceilings on the service; denv reserves
        # nothing, so Harbor refuses --cpus/--memory request or guarantee.
        return EnvironmentResourceCapabilities(cpu_limit=True, memory_limit=True, fractional_cpus=True)

    @property
    def _uses_compose(self) -> bool:
        return self._compose_path is not None

    @property
    def _dockerfile_only(self) -> bool:
        return (self._compose_path is None and not self.task_env_config.docker_image
                and (self.environment_dir / "Dockerfile").is_file())

    @classmethod
    def preflight(cls, kwargs: dict[str, Any] | None = None) -> None:
        super().preflight(kwargs)
        if not os.environ.get("DENV_API_KEY"):
            raise SystemExit("DENV_API_KEY is not set")
        storage = (kwargs or {}).get("storage", "refuse")
        if storage not in STORAGE_POLICIES:
            raise SystemExit(f"denv: --ek storage={storage}: use one of {', '.join(STORAGE_POLICIES)}")

    def _validate_definition(self) -> None:
        if self._compose_path is not None or self.task_env_config.docker_image:
            return
        if (self.environment_dir / "Dockerfile").is_file():
            return
        require_agent_environment_definition(
            self.environment_dir, docker_image=self.task_env_config.docker_image
        )

    # Harbor's capability checks raise from the constructor, and an exception
    # there ends the whole job (Trial.create is outside the trial's own error
    # handling); each refusal is kept and raised from start() instead, where
    # Harbor records it on that trial alone.

    def _defer(self, check: Any) -> None:
        try:
            check()
        except (RuntimeError, ValueError) as e:
            self._refusals.append(f"denv: {e}")

    def _validate_gpu_support(self) -> None:
        if self._effective_gpus > 0:
            self._refusals.append(
                f"denv: this task asks for {self._effective_gpus} GPU(s) and denv has no GPU "
                "passthrough yet; refused"
            )

    def _validate_resource_mode_support(self) -> None:
        # e.g. --cpus limit on a task that sets no cpus
        self._defer(super()._validate_resource_mode_support)

    def _validate_tpu_support(self) -> None:
        self._defer(super()._validate_tpu_support)

    def _validate_network_policy_support(self) -> None:
        self._defer(super()._validate_network_policy_support)

    def _validate_windows_support(self) -> None:
        self._defer(super()._validate_windows_support)

    def refusal(self) -> str | None:
        """Why denv will not run this task, or None."""
        if self._refusals:
            return "; ".join(self._refusals)
        storage = self._effective_storage_mb
        if storage and self._storage_policy == "refuse":
            # Why: x-denv.disk caps an environment's volumes, but a
            # container's writable layer has no size limit in denv (compose's
            # storage_opt is ignored), and Harbor's storage_mb is the whole
            # disk the task sees, so the cap it asks for would not hold.
            return (f"denv: this task asks for storage_mb = {storage}, and denv cannot enforce it "
                    "(x-denv.disk caps the volumes, but a container's writable layer has no size limit; "
                    "compose storage_opt is ignored); refused rather than run without the limit the task "
                    "sets (--ek storage=ignore runs it without one)")
        return None

    def caps(self) -> dict[str, Any]:
        """The compose caps of service ``main``: Harbor's values as hard limits
        (``--cpus``/``--memory`` ``limit`` or ``auto``; ``ignore`` drops them)."""
        out: dict[str, Any] = {}
        cpus = self._resource_limit_value("cpu", auto_mode=ResourceMode.LIMIT)
        mem = self._resource_limit_value("memory", auto_mode=ResourceMode.LIMIT)
        if cpus:
            out["cpus"] = float(cpus)
        if mem:
            out["mem_limit"] = f"{int(mem)}m"
        return out

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client()
        return self._client

    @property
    def env_id(self) -> str:
        if not self._env_id:
            raise RuntimeError("denv: the environment is not started")
        return self._env_id

    def egress(self) -> str:
        """``allow`` only when the task asks for the internet; ``deny`` otherwise."""
        cfg = self.task_env_config
        if getattr(cfg, "allow_internet", None) is True:
            return "allow"
        mode = getattr(cfg, "network_mode", None)
        if mode is not None and "network_mode" in cfg.model_fields_set:
            if getattr(mode, "value", mode) == "public":
                return "allow"
        return "deny"

    def _volumes(self) -> list[str]:
        volumes = list(PERSISTED)
        workdir = self.task_env_config.workdir
        if workdir and workdir not in volumes:
            volumes.append(workdir)
        return volumes

    def compose_text(self) -> str:
        """The compose file this task is deployed as (the image form without
        caps goes through POST /v1/sandboxes instead and has none)."""
        if self._compose_path is not None:
            doc = yaml.safe_load(self._compose_path.read_text()) or {}
            main = ((doc.get("services") or {}).get(SERVICE)) if isinstance(doc, dict) else None
            if isinstance(main, dict):
                for k, v in self.caps().items():
                    main.setdefault(k, v)
            xd = doc.get("x-denv") if isinstance(doc, dict) else None
            if isinstance(doc, dict) and (xd is None or isinstance(xd, dict)):
                # the task's network policy, unless the file says itself
                doc["x-denv"] = {"egress": self.egress(), **(xd or {})}
            return yaml.safe_dump(doc, sort_keys=False)
        svc: dict[str, Any] = {}
        if self.task_env_config.docker_image:
            svc["image"] = self.task_env_config.docker_image
        else:
            svc["build"] = {"context": ".", "dockerfile": "Dockerfile"}
        svc["command"] = IDLE_CMD
        env = self._startup_env()
        if env:
            svc["environment"] = {str(k): str(v) for k, v in env.items()}
        paths = self._volumes()
        svc["volumes"] = [f"v{i}:{p}" for i, p in enumerate(paths)]
        svc.update(self.caps())
        doc = {"x-denv": {"egress": self.egress()}, "services": {SERVICE: svc},
               "volumes": {f"v{i}": {} for i in range(len(paths))}}
        return yaml.safe_dump(doc, sort_keys=False)

    def task_digest(self, compose: str) -> str:
        """What attempts of one task share: the definition's content (Harbor's
        environment_id hashes the directory) and the compose file it becomes."""
        h = hashlib.sha256()
        for part in (self.client.server, self.environment_id, compose):
            b = part.encode()
            h.update(len(b).to_bytes(8, "big") + b)
        return h.hexdigest()

    def _sandbox_named(self, c: Client, **kw: Any) -> Sandbox:
        """``c.sandbox`` named ``harbor-<session>``; a retried trial (Harbor
        reuses the session id) whose earlier environment holds the name gets
        the name with a random suffix."""
        name = env_name_for(self.session_id)
        try:
            return c.sandbox(name=name, **kw)
        except DenvError as e:
            if e.status != 409:
                raise
            return c.sandbox(name=f"{name[:NAME_MAX - 7]}-{os.urandom(3).hex()}", **kw)

    def _deploy(self, c: Client, compose: str | None) -> None:
        if compose is None:
            image = self.task_env_config.docker_image
            assert image
            sbx = self._sandbox_named(
                c, image=image, cmd=["sleep", "infinity"], env=self._startup_env() or None,
                egress=self.egress(), volumes=self._volumes(), timeout_sec=START_TIMEOUT,
            )
            self._env_id = sbx.id
            return
        c.ensure_project(PROJECT)
        dep = c.deploy(PROJECT, compose, env=env_name_for(self.session_id), timeout_sec=START_TIMEOUT, base_dir=self.environment_dir)
        self._env_id = str(dep.get("EnvID") or "")
        if not self._env_id:
            raise RuntimeError(f"denv: deployment {dep.get('ID')} names no environment")

    def _fork_or_deploy(self, c: Client, compose: str | None, force_build: bool) -> None:
        key = self.task_digest(compose or f"image {self.task_env_config.docker_image} {self._startup_env()}")
        with _lock_for(key):
            # --force-build: every attempt deploys its own (the host's build
            # cache, keyed on the context, still decides whether it builds).
            version = None if force_build else _PREPARED.get(key)
            if version:
                try:
                    sbx = self._sandbox_named(c, from_version=version, timeout_sec=START_TIMEOUT)
                    self._env_id, self.forked_from = sbx.id, version
                    self.logger.info(f"denv: forked the prepared version {version} (task {key[:12]})")
                    return
                except DenvError as e:
                    self.logger.warning(f"denv: forking {version} failed ({e}); deploying again")
                    _PREPARED.pop(key, None)
            self._deploy(c, compose)
            version = c.current_version(self.env_id)
            if version:
                _PREPARED[key] = version

    def _start_sync(self, force_build: bool = False) -> None:
        why = self.refusal()
        if why:
            raise DenvRefusal(why)
        c = self.client
        plain_image = (self._compose_path is None and not self._dockerfile_only and not self.caps())
        self._fork_or_deploy(c, None if plain_image else self.compose_text(), force_build)
        dirs = " ".join(LOG_DIRS + TASK_DIRS)
        r = c.exec(self.env_id, SERVICE, shell_command(
            f"mkdir -p {dirs} && chmod 777 {' '.join(LOG_DIRS)}"), timeout_sec=120)
        if r.exit_code != 0:
            raise RuntimeError(f"denv: creating Harbor's directories failed ({r.exit_code}): {r.stderr.strip()}")

    async def start(self, force_build: bool) -> None:
        await asyncio.to_thread(self._start_sync, bool(force_build))
        await self._upload_environment_dir_after_start()

    async def stop(self, delete: bool) -> None:
        if not self._env_id:
            return
        if delete:
            env_id, self._env_id = self._env_id, None
            try:
                await asyncio.to_thread(self.client.destroy, env_id)
            except DenvError as e:
                self.logger.warning(f"denv: destroying {env_id} failed: {e}")
        else:
            self.logger.info(f"denv: environment {self._env_id} left running (delete=False)")

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        argv = shell_command(
            command,
            cwd=cwd or self.task_env_config.workdir,
            env=self._merge_env(env),
            user=self._resolve_user(user),
        )
        t = int(timeout_sec) if timeout_sec else DEFAULT_EXEC_TIMEOUT
        r = await asyncio.to_thread(self.client.exec, self.env_id, SERVICE, argv, t)
        if r.truncated:
            # Harbor's ExecResult has no way to say so, and agents parse stdout:
            # the output stays as denvd kept it (1 MiB of each stream) and the
            # cut is logged. Write large output to a file and download it.
            self.logger.warning(
                f"denv: output of {command[:80]!r} was cut at 1 MiB a stream by denvd; the rest is lost"
            )
        return ExecResult(stdout=r.stdout, stderr=r.stderr, return_code=r.exit_code)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await asyncio.to_thread(self.client.put_file, self.env_id, SERVICE, source_path, target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await asyncio.to_thread(self.client.put_dir, self.env_id, SERVICE, source_dir, target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        await asyncio.to_thread(self.client.get_file, self.env_id, SERVICE, source_path, target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        await asyncio.to_thread(self.client.get_dir, self.env_id, SERVICE, source_dir, target_dir)
