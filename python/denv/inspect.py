"""Inspect sandbox ``denv``: one denv environment per sample.

Select it with ``sandbox="denv"`` (image from ``DENV_SANDBOX_IMAGE``),
``("denv", "denv.yaml")``, ``("denv", DenvSandboxConfig(...))`` or
``("denv", "ver_…")``. Inspect finds it through the ``inspect_ai`` entry point
(``denv._inspect_registry``), so a task file need not import this module.
"""

from __future__ import annotations

import logging
import os
import posixpath
import shlex
import tarfile
import io
from typing import Any, Literal, Union, overload

import anyio
import yaml
from pydantic import BaseModel, ConfigDict, model_validator

from inspect_ai.util import (
    ExecResult,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    sandboxenv,
)

from denv.client import Client, DenvError, Sandbox, shell_command

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "python:3.12-slim"
DEFAULT_EXEC_TIMEOUT = 300
STDIN_PATH = "/tmp/.denv_stdin"
CONFIG_FILES = ["denv.yaml", "denv.yml"]


class DenvSandboxConfig(BaseModel):
    """What ``denv.yaml`` holds: an image or a version, and where exec runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str | None = None
    from_version: str | None = None
    egress: Literal["deny", "allow"] = "deny"
    service: str = "main"
    volumes: list[str] = ["/work"]

    @model_validator(mode="after")
    def _one_source(self) -> "DenvSandboxConfig":
        if bool(self.image) == bool(self.from_version):
            raise ValueError("denv: a sandbox config needs exactly one of image or from_version")
        return self


def resolve_config(config: SandboxEnvironmentConfigType | None) -> DenvSandboxConfig:
    """The ``DenvSandboxConfig`` for whatever Inspect passed as the sandbox config."""
    if config is None:
        return DenvSandboxConfig(image=os.environ.get("DENV_SANDBOX_IMAGE") or DEFAULT_IMAGE)
    if isinstance(config, DenvSandboxConfig):
        return config
    if isinstance(config, BaseModel):
        return DenvSandboxConfig(**config.model_dump())
    if isinstance(config, str):
        if os.path.isfile(config):
            with open(config, encoding="utf-8") as f:
                doc = yaml.safe_load(f) or {}
            if not isinstance(doc, dict):
                raise ValueError(f"denv: {config} must hold a mapping of sandbox settings")
            return DenvSandboxConfig(**doc)
        if config.startswith("ver_"):
            return DenvSandboxConfig(from_version=config)
        raise ValueError(
            f"denv: sandbox config {config!r} is not a file and not a version id (ver_…). "
            "Inspect reads a string config as a file path: put the image in denv.yaml "
            "or pass DenvSandboxConfig(image=...)."
        )
    raise ValueError(f"denv: unsupported sandbox config {config!r}")


def _is_timeout(e: BaseException) -> bool:
    return isinstance(e, TimeoutError)


@sandboxenv(name="denv")
class DenvSandbox(SandboxEnvironment):
    """One denv environment; ``exec`` runs in its ``service``."""

    def __init__(self, client: Client, env_id: str, service: str, sandbox: Sandbox | None = None) -> None:
        super().__init__()
        self._client = client
        self._env_id = env_id
        self._service = service
        self._sandbox = sandbox
        self._workdir: str | None = None

    # ---- lifecycle ----

    @classmethod
    def config_files(cls) -> list[str]:
        return list(CONFIG_FILES)

    @classmethod
    def default_concurrency(cls) -> int | None:
        return 8

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return DenvSandboxConfig(**config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        resolve_config(config)
        Client()  # a missing DENV_API_KEY fails here, before any model call

    @classmethod
    async def sample_init(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        metadata: dict[str, str],
    ) -> dict[str, SandboxEnvironment]:
        cfg = resolve_config(config)
        client = Client()
        if cfg.image:
            def make() -> Sandbox:
                return client.sandbox(image=cfg.image, cmd=["sleep", "infinity"],
                                      egress=cfg.egress, volumes=list(cfg.volumes))
        else:
            def make() -> Sandbox:
                return client.sandbox(from_version=cfg.from_version, egress=cfg.egress)
        sbx = await anyio.to_thread.run_sync(make)
        return {"default": cls(client, sbx.id, cfg.service, sbx)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for env in environments.values():
            if isinstance(env, DenvSandbox):
                try:
                    await anyio.to_thread.run_sync(env._client.destroy, env._env_id)
                except DenvError as e:
                    logger.warning("denv: destroying %s failed: %s", env._env_id, e)

    @classmethod
    async def task_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool) -> None:
        return None

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        return None

    # ---- inside the sample ----

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        script = shlex.join(cmd)
        if input is not None:
            data = input.encode("utf-8") if isinstance(input, str) else bytes(input)
            await anyio.to_thread.run_sync(
                self._client.put_bytes, self._env_id, self._service, STDIN_PATH, data)
            script += f" < {STDIN_PATH}"
        argv = shell_command(script, cwd=cwd, env=env, user=user)
        t = int(timeout) if timeout else DEFAULT_EXEC_TIMEOUT
        try:
            r = await anyio.to_thread.run_sync(self._client.exec, self._env_id, self._service, argv, t)
        except DenvError as e:
            if _is_timeout(e):
                raise TimeoutError(f"denv: command timed out after {t} s: {e}") from e
            raise
        return ExecResult(success=r.exit_code == 0, returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)

    async def _abs(self, file: str) -> str:
        if file.startswith("/"):
            return file
        if self._workdir is None:
            r = await anyio.to_thread.run_sync(
                self._client.exec, self._env_id, self._service, ["sh", "-c", "pwd"], 30)
            self._workdir = r.stdout.strip() or "/"
        return posixpath.normpath(posixpath.join(self._workdir, file))

    async def write_file(self, file: str, contents: str | bytes) -> None:
        path = await self._abs(file)
        data = contents.encode("utf-8") if isinstance(contents, str) else bytes(contents)
        await anyio.to_thread.run_sync(self._client.put_bytes, self._env_id, self._service, path, data)

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> Union[str, bytes]:
        path = await self._abs(file)
        try:
            archive = await anyio.to_thread.run_sync(self._client.get_tar, self._env_id, self._service, path)
        except DenvError as e:
            if _is_timeout(e):
                raise
            probe = await anyio.to_thread.run_sync(
                self._client.exec, self._env_id, self._service,
                ["sh", "-c", 'test -e "$1"', "sh", path], 30)
            if probe.exit_code != 0:
                raise FileNotFoundError(f"File not found: {file}") from e
            raise
        data: bytes | None = None
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tf:
            for m in tf:
                if m.isdir():
                    raise IsADirectoryError(f"Is a directory: {file}")
                if m.isfile():
                    f = tf.extractfile(m)
                    data = f.read() if f is not None else b""
                    break
        if data is None:
            raise FileNotFoundError(f"File not found: {file}")
        return data.decode("utf-8") if text else data

    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        return SandboxConnection(
            type="denv",
            command=f"denv exec --service {self._service} {self._env_id} -- sh",
        )
