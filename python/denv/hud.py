"""HUD runtime on denv: ``taskset.run(agent, runtime=DenvRuntime("my-env"))``.

A HUD 0.6 runtime is a provider: called with the task being placed, it starts
one environment and yields a :class:`hud.eval.runtime.Runtime` whose url is
the environment's control channel (``tcp://host:port``, HUD's JSON-RPC).
``DenvRuntime`` starts the image as a denv environment of the project
``hud`` (one service ``main``, egress denied unless asked, the control port
published by denvd's ingress proxy on 127.0.0.1), caps from HUD's resource
requests (``cpu`` to ``cpus``, ``memory_mb`` to ``mem_limit``; a GPU, an OS
or a TPU is refused, ``storage_mb`` is best effort as HUD allows), waits
until the channel accepts a connection, and destroys the environment when the
rollout ends. ``DenvRuntime.from_denv_version(ver)`` forks a denv version
instead (its data included), and :meth:`DenvRuntime.fork` / :meth:`grade` act
on the environment of the rollout in progress: a fork of it, and ``denv
verify`` (the version's ``x-denv.verifier`` on a fork, the agent frozen).

HUD 0.6 needs Python 3.11 or 3.12 (its own floor and ceiling).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator

import yaml

try:
    from hud.eval.runtime.core import Runtime, RuntimeConfig
except ImportError as _e:  # pragma: no cover - depends on the Python running it
    raise ImportError(
        "denv.hud needs HUD 0.6 (pip install 'denv[hud]'), which needs Python 3.11 or 3.12"
    ) from _e

from denv.client import Client, Sandbox, Verdict

if TYPE_CHECKING:
    from hud.eval.task import Task

PROJECT = "hud"
SERVICE = "main"
DEFAULT_PORT = 8765  # what HUD's scaffolded Dockerfile.hud serves
READY_TIMEOUT = 120.0
START_TIMEOUT = 600
SUPPORTED = {"cpu", "memory_mb", "storage_mb"}


def _host_port(sbx: Sandbox, port: int) -> tuple[str, int]:
    """Where denvd published the control port: ``host:port`` from the environment's endpoints."""
    ep = sbx.endpoints.get(f"{SERVICE}:{port}") or sbx.endpoints.get(SERVICE) or \
        next(iter(sbx.endpoints.values()), "")
    ep = ep.split("://", 1)[-1].rstrip("/")
    host, _, p = ep.rpartition(":")
    if not host or not p.isdigit():
        raise RuntimeError(f"denv: environment {sbx.id} published no endpoint for port {port} ({sbx.endpoints})")
    return host, int(p)


def _wait_accepting(host: str, port: int, timeout: float) -> None:
    """Until a TCP connection to the control channel succeeds (denvd's proxy
    accepts only once the container's port does)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=2) as s:
                s.settimeout(0.3)
                try:
                    if s.recv(1) == b"":  # the proxy closed: nothing behind it yet
                        raise ConnectionError("closed at once")
                except socket.timeout:
                    return  # open and quiet: a server waiting for a request
                return
        except OSError as e:
            last = e
            time.sleep(0.3)
    raise TimeoutError(f"denv: the HUD control channel on {host}:{port} did not answer within {timeout:.0f} s ({last})")


class DenvRuntime:
    """A HUD provider whose substrate is a denv environment (see the module's text)."""

    def __init__(self, image: str | None = None, *, port: int = DEFAULT_PORT,
                 runtime_config: RuntimeConfig | dict[str, Any] | None = None,
                 env_vars: dict[str, str] | None = None, egress: str = "deny",
                 client: Client | None = None, version: str | None = None) -> None:
        if egress not in ("deny", "allow"):
            raise ValueError(f"denv: egress must be deny or allow, not {egress!r}")
        self.port = port
        self.env_vars = dict(env_vars or {})
        self.egress = egress
        self.version = version
        self._client = client
        config = RuntimeConfig(image=image) if image is not None else RuntimeConfig()
        if runtime_config is not None:
            config = config.with_overrides(RuntimeConfig.model_validate(runtime_config))
        self.runtime_config = config if config.model_dump(exclude_none=True) else None
        self.env_id: str | None = None  # the rollout in progress
        self.environments: list[str] = []  # every environment this runtime started

    @classmethod
    def from_denv_version(cls, version: str, *, port: int = DEFAULT_PORT,
                          client: Client | None = None) -> "DenvRuntime":
        """Each rollout forks ``version`` (whole stack, data included)."""
        return cls(port=port, client=client, version=version)

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client()
        return self._client

    def compose_text(self, config: RuntimeConfig) -> str:
        """The one-service compose file an image rollout is deployed as."""
        if config.compose is not None:
            raise ValueError("DenvRuntime runs image environments (runtime_config.image); "
                             "a Compose project is not supported yet")
        if config.image is None:
            raise ValueError("DenvRuntime requires runtime_config.image (or from_denv_version)")
        svc: dict[str, Any] = {"image": config.image, "ports": [str(self.port)]}
        res = config.resources
        if res is not None:
            res._require_support("DenvRuntime", SUPPORTED)
            if res.cpu is not None:
                svc["cpus"] = float(res.cpu)
            if res.memory_mb is not None:
                svc["mem_limit"] = f"{int(res.memory_mb)}m"
        if self.env_vars:
            svc["environment"] = dict(self.env_vars)
        return yaml.safe_dump({"x-denv": {"egress": self.egress}, "services": {SERVICE: svc}}, sort_keys=False)

    def _start(self, task: Task | None) -> Sandbox:
        c = self.client
        if self.version:
            return c.sandbox(from_version=self.version, timeout_sec=START_TIMEOUT)
        config = (self.runtime_config or RuntimeConfig()).with_overrides(
            getattr(task, "runtime_config", None))
        compose = self.compose_text(config)
        c.ensure_project(PROJECT)
        dep = c.deploy(PROJECT, compose, env=f"hud-{os.urandom(4).hex()}", timeout_sec=START_TIMEOUT)
        if dep.get("Status") != "succeeded":
            raise RuntimeError(f"denv: deployment {dep.get('ID')} {dep.get('Status')}: {dep.get('Error')}")
        return c._sandbox_of(c.environment(str(dep.get("EnvID") or "")))

    @asynccontextmanager
    async def __call__(self, task: Task) -> AsyncIterator[Runtime]:
        sbx = await asyncio.to_thread(self._start, task)
        self.environments.append(sbx.id)
        try:
            host, port = _host_port(sbx, self.port)
            await asyncio.to_thread(_wait_accepting, host, port, READY_TIMEOUT)
            self.env_id = sbx.id
            yield Runtime(f"tcp://{host}:{port}", params={"denv_env": sbx.id},
                          config=self.runtime_config)
        finally:
            self.env_id = None
            await asyncio.to_thread(self.client.destroy, sbx.id)

    def _current(self) -> str:
        if not self.env_id:
            raise RuntimeError("denv: no rollout is running on this runtime")
        return self.env_id

    def fork(self, name: str | None = None) -> Sandbox:
        """A fork of the running rollout's environment (snapshot, then a copy with its data)."""
        env_id = self._current()
        return self.client.fork(env_id, name=name)

    def grade(self) -> Verdict:
        """``denv verify`` on the running rollout's environment: its version's
        ``x-denv.verifier`` on a fork, the agent frozen; the reward is ``Verdict.reward``."""
        env_id = self._current()
        return self.client.verify(env_id)
