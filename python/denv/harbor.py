"""Harbor backend: ``harbor run ... -e denv.harbor:DenvEnvironment``.

A task with ``environment/docker-compose.yaml`` (or ``.yml``) is deployed as the
environment ``harbor-<session>`` of the project ``sandboxes``; a task with
``[environment] docker_image`` becomes one sandbox from that image. The agent,
the oracle and the verifier all run in service ``main``.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.definition import require_agent_environment_definition

from denv.client import Client, DenvError, shell_command

SERVICE = "main"
PROJECT = "sandboxes"
DEFAULT_EXEC_TIMEOUT = 600
START_TIMEOUT = 900
COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml")
LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")
TASK_DIRS = ("/tests", "/solution", "/app")
DOCKERFILE_ONLY = (
    "denv: this task has only a Dockerfile. Set [environment] docker_image in "
    "task.toml (or add a compose file) until denv ships host-side builds."
)
_NAME_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def env_name_for(session_id: str) -> str:
    """``harbor-<session>`` made a valid denv name (letters, digits, . _ -; 63 at most)."""
    name = "harbor-" + _NAME_BAD.sub("-", session_id).strip("-._")
    return name[:63].rstrip("-._") or "harbor"


class DenvEnvironment(BaseEnvironment):
    """A Harbor environment that runs on denv."""

    def __init__(self, environment_dir: Path, *args: Any, client: Client | None = None, **kwargs: Any) -> None:
        env_dir = Path(environment_dir)
        # State that capabilities and _validate_definition read must exist
        # before BaseEnvironment.__init__ calls them.
        self._compose_path: Path | None = next(
            (env_dir / n for n in COMPOSE_NAMES if (env_dir / n).is_file()), None
        )
        self._client: Client | None = client
        self._env_id: str | None = None
        super().__init__(env_dir, *args, **kwargs)

    # ---- what Harbor asks of a backend ----

    @staticmethod
    def type() -> str:
        return "denv"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True, docker_compose=True)

    @property
    def _uses_compose(self) -> bool:
        return self._compose_path is not None

    @classmethod
    def preflight(cls, kwargs: dict[str, Any] | None = None) -> None:
        super().preflight(kwargs)
        if not os.environ.get("DENV_API_KEY"):
            raise SystemExit("DENV_API_KEY is not set")

    def _validate_definition(self) -> None:
        if self._compose_path is not None or self.task_env_config.docker_image:
            return
        if (self.environment_dir / "Dockerfile").is_file():
            raise ValueError(DOCKERFILE_ONLY)
        require_agent_environment_definition(
            self.environment_dir, docker_image=self.task_env_config.docker_image
        )

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

    def _start_sync(self) -> None:
        c = self.client
        if self._compose_path is not None:
            c.ensure_project(PROJECT)
            dep = c.deploy(
                PROJECT, self._compose_path.read_text(), env=env_name_for(self.session_id),
                timeout_sec=START_TIMEOUT,
            )
            self._env_id = str(dep.get("EnvID") or "")
            if not self._env_id:
                raise RuntimeError(f"denv: deployment {dep.get('ID')} names no environment")
        else:
            image = self.task_env_config.docker_image
            assert image
            volumes = ["/app", "/logs"]
            workdir = self.task_env_config.workdir
            if workdir and workdir not in volumes:
                volumes.append(workdir)
            sbx = c.sandbox(
                image=image, cmd=["sleep", "infinity"], env=self._startup_env() or None,
                egress=self.egress(), volumes=volumes, timeout_sec=START_TIMEOUT,
            )
            self._env_id = sbx.id
        dirs = " ".join(LOG_DIRS + TASK_DIRS)
        r = c.exec(self._env_id, SERVICE, shell_command(
            f"mkdir -p {dirs} && chmod 777 {' '.join(LOG_DIRS)}"), timeout_sec=120)
        if r.exit_code != 0:
            raise RuntimeError(f"denv: creating Harbor's directories failed ({r.exit_code}): {r.stderr.strip()}")

    async def start(self, force_build: bool) -> None:
        await asyncio.to_thread(self._start_sync)
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
