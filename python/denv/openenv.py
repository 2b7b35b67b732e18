"""OpenEnv container provider: ``MyEnv.from_docker_image(image, provider=DenvProvider())``.

The environment's HTTP port is published by denv on 127.0.0.1 of the host
that runs it. With ``egress="deny"`` (the default) the environment has no
route out and denvd publishes the port through its own ingress proxy,
which carries connections from the host into the environment and never the
other way; ``egress="allow"`` gives it a normal network and Docker's
published port. Neither choice raises: deny is the default and is reachable
from the host.
``start_container("", build=DIR, dockerfile="server/Dockerfile")`` builds
the server's image on the denv host from DIR (``openenv init``'s layout:
the environment's directory is the context) instead of running a pushed
image; a second start of the unchanged directory finds the image cached.
``fork()`` snapshots the live environment, makes a new environment from that
version and returns a provider bound to it once the child's server answers
``/health``; ``from_denv_version`` (also ``DenvVersionMixin.from_denv_version``
on a client class) starts an OpenEnv client on a fork of a version.
"""

from __future__ import annotations

import time
from typing import Any, Optional, Type, TypeVar

import httpx

from openenv.core.containers.runtime.providers import ContainerProvider

from denv.client import Client, Sandbox

DEFAULT_PORT = 8000
# How long fork() waits for the child's server to answer /health: the server
# restarts in the fork and rebuilds its state from disk first.
FORK_READY_TIMEOUT = 60.0
T = TypeVar("T")


def _base_url(sbx: Sandbox, service: str | None = None) -> str | None:
    if not sbx.endpoints:
        return None
    if service:
        ep = sbx.endpoints.get(service)
    else:
        ep = sbx.endpoints.get("main") or next(iter(sbx.endpoints.values()))
    if not ep:
        return None
    return ep if ep.startswith(("http://", "https://")) else f"http://{ep}"


class DenvProvider(ContainerProvider):
    """An OpenEnv ``ContainerProvider`` whose container is a denv environment."""

    def __init__(self, client: Client | None = None, egress: str = "deny") -> None:
        if egress not in ("deny", "allow"):
            raise ValueError(f"denv: egress must be deny or allow, not {egress!r}")
        self._client = client
        self.egress = egress
        self.env_id: str | None = None
        self.base_url: str | None = None
        self.sandbox: Sandbox | None = None

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client()
        return self._client

    def _bind(self, sbx: Sandbox, service: str | None = None) -> str | None:
        self.sandbox = sbx
        self.env_id = sbx.id
        self.base_url = _base_url(sbx, service)
        return self.base_url

    def start_container(
        self,
        image: str,
        port: Optional[int] = None,
        env_vars: Optional[dict[str, str]] = None,
        **kwargs: Any,
    ) -> str:
        """``image`` on the denv host, or with ``build=DIR`` (and ``dockerfile=``, default
        ``Dockerfile``, relative to DIR) the image built there from DIR; ``cmd=`` replaces
        the image's command. The OpenEnv server's URL (http://127.0.0.1:PORT)."""
        build = kwargs.get("build")
        if build:
            sbx = self.client.sandbox(
                build=build, dockerfile=kwargs.get("dockerfile") or "Dockerfile", cmd=kwargs.get("cmd"),
                env=env_vars, ports=[port or DEFAULT_PORT], egress=self.egress,
            )
        else:
            sbx = self.client.sandbox(
                image=image, cmd=kwargs.get("cmd"), env=env_vars,
                ports=[port or DEFAULT_PORT], egress=self.egress,
            )
        url = self._bind(sbx)
        if not url:
            raise RuntimeError(
                f"denv: environment {sbx.id} published no endpoint"
                + (" (egress=\"deny\" needs a denvd with the ingress proxy; or use DenvProvider(egress=\"allow\"))"
                   if self.egress == "deny" else "")
            )
        return url

    def start_from_version(self, version: str, service: str | None = None) -> str:
        """Fork ``version`` (data included) and bind to the OpenEnv server's endpoint."""
        sbx = self.client.sandbox(from_version=version, egress=self.egress)
        url = self._bind(sbx, service)
        if not url:
            raise RuntimeError(f"denv: environment {sbx.id} (from {version}) published no endpoint")
        return url

    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
        """Poll ``base_url``/health until it answers below 500; ``TimeoutError`` after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        with httpx.Client(trust_env=False, timeout=2.0) as h:
            while True:
                try:
                    r = h.get(f"{base_url.rstrip('/')}/health")
                    if r.status_code < 500:
                        return
                    last = f"status {r.status_code}"
                except httpx.HTTPError as e:
                    last = str(e) or type(e).__name__
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"denv: {base_url} not ready within {timeout_s:g} s ({last})")
                time.sleep(0.5)

    def fork(self, name: str | None = None, timeout_s: float | None = FORK_READY_TIMEOUT) -> "DenvProvider":
        """Snapshot the live environment; a provider bound to a new one made from it.

        Returns once the child's server answers ``/health`` (``wait_for_ready``),
        or raises ``TimeoutError`` after ``timeout_s`` seconds, the child
        destroyed. ``timeout_s=None`` returns as soon as the child is created.
        """
        if not self.env_id:
            raise RuntimeError("denv: nothing to fork; the provider has no environment")
        child = DenvProvider(client=self.client, egress=self.egress)
        version = self.client.snapshot(self.env_id)
        url = child._bind(self.client.sandbox(from_version=version, name=name, egress=self.egress))
        if timeout_s is None:
            return child
        try:
            if not url:
                raise RuntimeError(f"denv: fork {child.env_id} (from {version}) published no endpoint")
            child.wait_for_ready(url, timeout_s)
        except BaseException:
            child.stop_container()
            raise
        return child

    def stop_container(self) -> None:
        if self.env_id:
            env_id, self.env_id, self.base_url = self.env_id, None, None
            self.client.destroy(env_id)

    def close(self) -> None:
        self.stop_container()


async def from_denv_version(
    env_cls: Type[T],
    version: str,
    provider: DenvProvider | None = None,
    service: str | None = None,
    timeout_s: float = 60.0,
) -> T:
    """An OpenEnv client of ``env_cls`` connected to a fork of ``version``."""
    import asyncio

    provider = provider or DenvProvider()
    base_url = await asyncio.to_thread(provider.start_from_version, version, service)
    await asyncio.to_thread(provider.wait_for_ready, base_url, timeout_s)
    client = env_cls(base_url=base_url, provider=provider)  # type: ignore[call-arg]
    await client.connect()  # type: ignore[attr-defined]
    return client


class DenvVersionMixin:
    """Gives an OpenEnv client class ``from_denv_version`` (put it before ``EnvClient``)."""

    @classmethod
    async def from_denv_version(
        cls: Type[T],
        version: str,
        provider: DenvProvider | None = None,
        service: str | None = None,
        timeout_s: float = 60.0,
    ) -> T:
        return await from_denv_version(cls, version, provider=provider, service=service, timeout_s=timeout_s)
