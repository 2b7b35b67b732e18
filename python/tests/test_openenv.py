"""denv.openenv.DenvProvider: against the fake REST API, and with a real http.server container."""

from __future__ import annotations

import os
import threading
import unittest
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from fakeapi import KEY, DockerBackend, FakeDenv
from test_harbor import docker_image_present

from openenv.core.containers.runtime.providers import ContainerProvider

from denv import Client
from denv.openenv import DenvProvider, DenvVersionMixin, from_denv_version

IMAGE = "denv-test/debian"  # has python3 for `python3 -m http.server`


def status_server(status: int) -> HTTPServer:
    class H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status if self.path == "/health" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a: Any) -> None:
            pass

    s = HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


class TestProvider(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeDenv().start()
        self.client = Client(self.fake.url, KEY, timeout=10)
        self.client.poll_interval = 0.01

    def tearDown(self) -> None:
        self.fake.stop()

    def test_is_a_container_provider(self) -> None:
        self.assertTrue(issubclass(DenvProvider, ContainerProvider))
        with self.assertRaises(ValueError):
            DenvProvider(egress="open")

    def test_start_fork_stop(self) -> None:
        p = DenvProvider(client=self.client, egress="allow")
        url = p.start_container("org/env:v1", port=8080, env_vars={"A": "1"}, cmd=["serve"])
        self.assertEqual(url, "http://127.0.0.1:18000")
        self.assertEqual(p.base_url, url)
        self.assertEqual(self.fake.calls("POST", "/v1/sandboxes")[0].body,
                         {"image": "org/env:v1", "cmd": ["serve"], "env": {"A": "1"}, "ports": ["8080"],
                          "egress": "allow", "timeout_sec": 600})
        child = p.fork(timeout_s=None)  # nothing listens on the fake's endpoints
        self.assertIsInstance(child, DenvProvider)
        self.assertNotEqual(child.env_id, p.env_id)
        self.assertEqual(child.base_url, "http://127.0.0.1:18001")
        self.assertEqual([r.path for r in self.fake.calls("POST")][-2:], [f"/v1/envs/{p.env_id}/snapshot", "/v1/sandboxes"])
        child.close()
        env_id = p.env_id
        p.stop_container()
        self.assertEqual(p.env_id, None)
        self.assertEqual([r.path for r in self.fake.calls("DELETE")], [f"/v1/envs/{child.sandbox.id}", f"/v1/envs/{env_id}"])
        p.stop_container()  # a second stop is a no-op

    def test_fork_waits_for_health(self) -> None:
        p = DenvProvider(client=self.client, egress="allow")
        p.start_container("org/env:v1")
        waited: list[tuple[str, float]] = []
        orig = DenvProvider.wait_for_ready
        try:
            DenvProvider.wait_for_ready = lambda self, url, timeout_s=30.0: waited.append((url, timeout_s))  # type: ignore[method-assign]
            child = p.fork(timeout_s=7)
            self.assertEqual(waited, [(child.base_url, 7)])
            self.assertEqual(p.fork().env_id is not None, True)
            self.assertEqual(waited[-1][1], 60.0)  # the default

            def never(self: DenvProvider, url: str, timeout_s: float = 30.0) -> None:
                raise TimeoutError(f"denv: {url} not ready within {timeout_s:g} s")
            DenvProvider.wait_for_ready = never  # type: ignore[method-assign]
            before = len(self.fake.calls("DELETE"))
            with self.assertRaises(TimeoutError):
                p.fork(timeout_s=1)
            # the child that never answered is destroyed, not leaked
            self.assertEqual(len(self.fake.calls("DELETE")), before + 1)
        finally:
            DenvProvider.wait_for_ready = orig  # type: ignore[method-assign]

    def test_default_port_and_deny(self) -> None:
        # egress deny is the default: the port is published through denvd's ingress proxy
        p = DenvProvider(client=self.client)
        self.assertEqual(p.egress, "deny")
        url = p.start_container("org/env:v1")
        self.assertEqual(url, "http://127.0.0.1:18000")
        body = self.fake.calls("POST", "/v1/sandboxes")[0].body
        self.assertEqual(body["ports"], ["8000"])
        self.assertEqual(body["egress"], "deny")
        p.close()
        # and a server that creates it but publishes nothing
        self.fake.backend.create = lambda env, spec: {}  # type: ignore[method-assign]
        p2 = DenvProvider(client=self.client)
        with self.assertRaises(RuntimeError) as cm:
            p2.start_container("org/env:v1")
        self.assertIn("published no endpoint", str(cm.exception))

    def test_start_from_build(self) -> None:
        """build=DIR goes to Client.sandbox(build=...) with the dockerfile, port and egress."""
        from unittest import mock
        from denv.client import Sandbox
        c = mock.Mock()
        c.sandbox.return_value = Sandbox(id="env_1", name="sbx", status="running",
                                         endpoints={"sandbox": "127.0.0.1:18001"}, raw={})
        p = DenvProvider(client=c)
        url = p.start_container("", port=8000, env_vars={"A": "1"}, build="/ctx", dockerfile="server/Dockerfile")
        self.assertEqual(url, "http://127.0.0.1:18001")
        c.sandbox.assert_called_once_with(build="/ctx", dockerfile="server/Dockerfile", cmd=None, env={"A": "1"},
                                          ports=[8000], egress="deny")

    def test_wait_for_ready(self) -> None:
        p = DenvProvider(client=self.client)
        ok = status_server(404)  # below 500 counts as ready
        try:
            p.wait_for_ready(f"http://127.0.0.1:{ok.server_address[1]}", timeout_s=5)
        finally:
            ok.shutdown()
        bad = status_server(503)
        try:
            with self.assertRaises(TimeoutError):
                p.wait_for_ready(f"http://127.0.0.1:{bad.server_address[1]}", timeout_s=1)
        finally:
            bad.shutdown()

    def test_from_denv_version(self) -> None:
        import asyncio
        v = self.client.current_version(self.client.sandbox(image="x", ports=[8000], egress="allow").id)
        ready = status_server(200)
        seen: dict[str, Any] = {}

        class Env(DenvVersionMixin):
            def __init__(self, base_url: str, provider: Any) -> None:
                seen["url"], seen["provider"] = base_url, provider

            async def connect(self) -> None:
                seen["connected"] = True

        p = DenvProvider(client=self.client, egress="allow")
        p.start_from_version = lambda version, service=None: (  # type: ignore[method-assign]
            DenvProvider.start_from_version(p, version, service),
            f"http://127.0.0.1:{ready.server_address[1]}")[1]
        try:
            env = asyncio.run(Env.from_denv_version(v, provider=p))
            self.assertIsInstance(env, Env)
            self.assertTrue(seen["connected"])
            self.assertIs(seen["provider"], p)
            self.assertEqual(self.fake.calls("POST", "/v1/sandboxes")[-1].body["from_version"], v)
            self.assertTrue(callable(from_denv_version))
        finally:
            ready.shutdown()


@unittest.skipUnless(docker_image_present(IMAGE), f"Docker with the fixture image {IMAGE} is needed")
class TestHttpServerImage(unittest.TestCase):
    def test_start_ready_fork_stop(self) -> None:
        fake = FakeDenv(backend=DockerBackend(label=f"openenv{os.getpid()}")).start()
        try:
            c = Client(fake.url, KEY, timeout=60)
            c.poll_interval = 0.05
            p = DenvProvider(client=c, egress="allow")
            url = p.start_container(IMAGE, port=8000, cmd=["python3", "-m", "http.server", "8000"])
            p.wait_for_ready(url, timeout_s=30)
            child = p.fork()
            assert child.base_url
            child.wait_for_ready(child.base_url, timeout_s=30)
            self.assertNotEqual(child.base_url, url)
            child.close()
            p.close()
            self.assertEqual(fake.backend.containers, {})
        finally:
            fake.stop()


if __name__ == "__main__":
    unittest.main()
