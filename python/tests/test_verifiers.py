"""denv.verifiers against the fake REST API: Prime's client surface, its models and errors."""

from __future__ import annotations

import asyncio
import inspect
import json
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from fakeapi import KEY, FakeDenv

from denv import Client

try:
    import prime_sandboxes as ps
    from denv.verifiers import AsyncDenvSandboxClient, DenvSandboxClient
except ImportError as e:  # the extra is not installed
    ps = None
    why = str(e)
else:
    why = ""


@unittest.skipIf(ps is None, f"prime-sandboxes is not installed: {why}")
class TestSurface(unittest.TestCase):
    def test_same_methods_and_arguments_as_prime(self) -> None:
        """Every method we answer takes Prime's arguments by the same names, defaults and kinds."""
        for ours, theirs in ((DenvSandboxClient, ps.SandboxClient), (AsyncDenvSandboxClient, ps.AsyncSandboxClient)):
            for name in ("create", "get", "list", "delete", "bulk_delete", "get_sandbox_statuses",
                         "wait_for_creation", "bulk_wait_for_creation", "get_logs", "checkpoint",
                         "execute_command", "start_background_job", "get_background_job",
                         "get_background_job_status", "run_background_job", "upload_bytes",
                         "upload_file", "download_file", "read_file", "set_network"):
                a = inspect.signature(getattr(ours, name))
                b = inspect.signature(getattr(theirs, name))
                self.assertEqual([(p.name, p.kind, p.default) for p in a.parameters.values()],
                                 [(p.name, p.kind, p.default) for p in b.parameters.values()],
                                 f"{ours.__name__}.{name}")
                self.assertEqual(inspect.iscoroutinefunction(getattr(ours, name)),
                                 inspect.iscoroutinefunction(getattr(theirs, name)), name)


@unittest.skipIf(ps is None, f"prime-sandboxes is not installed: {why}")
class TestAgainstFake(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeDenv().start()
        c = Client(server=self.fake.url, api_key=KEY, timeout=10)
        c.poll_interval = 0.01
        self.sc = DenvSandboxClient(c)

    def tearDown(self) -> None:
        self.sc.close()
        self.fake.stop()

    def test_create_get_exec_delete(self) -> None:
        req = ps.CreateSandboxRequest(name="r1", docker_image="busybox", environment_vars={"A": "1"},
                                      labels=["run-7"])
        sbx = DenvSandboxClient(self.sc.client, egress="allow").create(req)
        self.sc._made[sbx.id] = (req, sbx.created_at)
        self.assertIsInstance(sbx, ps.Sandbox)
        self.assertEqual((sbx.status, sbx.docker_image, sbx.labels), ("RUNNING", "busybox", ["run-7"]))
        body = self.fake.calls("POST", "/v1/sandboxes")[-1].body
        self.assertEqual((body["image"], body["cmd"], body["env"], body["egress"]),
                         ("busybox", ["sleep", "infinity"], {"A": "1"}, "allow"))
        self.sc.wait_for_creation(sbx.id)
        self.assertEqual(self.sc.bulk_wait_for_creation([sbx.id]), {sbx.id: "RUNNING"})
        self.assertEqual(self.sc.get(sbx.id).id, sbx.id)
        st = self.sc.get_sandbox_statuses([sbx.id])
        self.assertEqual(st.statuses[0].status, ps.SandboxStatus.RUNNING)
        r = self.sc.execute_command(sbx.id, "echo hi", working_dir="/w", env={"B": "2"})
        self.assertIsInstance(r, ps.CommandResponse)
        sent = self.fake.calls("POST", ".*/exec")[-1].body
        self.assertEqual((sent["service"], sent["timeout_sec"]), ("main", 300))
        self.assertIn("export B=2", sent["cmd"][-1])
        self.assertIn("cd -- /w", sent["cmd"][-1])
        self.assertEqual(json.loads(r.stdout), sent["cmd"])
        out = self.sc.bulk_delete(labels=["run-7"])
        self.assertEqual((out.succeeded, out.failed), ([sbx.id], []))
        try:
            self.assertEqual(self.sc.get(sbx.id).status, "TERMINATED")
        except ps.APIError as e:  # denv-cp may forget a destroyed environment
            self.assertIn("no sandbox", str(e))
        with self.assertRaises(ValueError):
            self.sc.bulk_delete()

    def test_egress_defaults_to_deny(self) -> None:
        allowing = DenvSandboxClient(self.sc.client, egress="allow")
        for i, (allow, deny) in enumerate(((None, None), ([], None), (["pypi.org"], None), (None, ["evil.example"]))):
            for j, (c, want) in enumerate(((self.sc, "deny"),
                                           (allowing, "allow" if allow is None and deny is None else "deny"))):
                # Names differ: the fake, like denv-cp, refuses a name that is taken.
                c.create(ps.CreateSandboxRequest(name=f"e{i}{j}", docker_image="busybox",
                                                 network_allowlist=allow, network_denylist=deny))
                self.assertEqual(self.fake.calls("POST", "/v1/sandboxes")[-1].body["egress"], want)
        with self.assertRaises(ps.APIError):
            self.sc.set_network("env_x", allow=["pypi.org"])

    def test_files(self) -> None:
        sbx = self.sc.create(ps.CreateSandboxRequest(name="f", docker_image="busybox"))
        up = self.sc.upload_bytes(sbx.id, "/work/a.txt", b"alpha beta", "a.txt")
        self.assertIsInstance(up, ps.FileUploadResponse)
        self.assertEqual((up.success, up.path, up.size), (True, "/work/a.txt", 10))
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "src.bin"
            src.write_bytes(b"\x00\x01")
            self.sc.upload_file(sbx.id, "/work/b.bin", str(src))
            self.sc.download_file(sbx.id, "/work/b.bin", str(Path(tmp) / "deep" / "b.bin"))
            self.assertEqual((Path(tmp) / "deep" / "b.bin").read_bytes(), b"\x00\x01")
            with self.assertRaises(ps.SandboxFileNotFoundError):
                self.sc.download_file(sbx.id, "/work/missing", str(Path(tmp) / "m"))
        rf = self.sc.read_file(sbx.id, "/work/a.txt", offset=6, length=2)
        self.assertEqual((rf.content, rf.size, rf.total_size, rf.truncated), ("be", 2, 10, True))

    def test_checkpoint_is_a_version_and_forks(self) -> None:
        sbx = self.sc.create(ps.CreateSandboxRequest(name="p", docker_image="busybox"))
        self.sc.upload_bytes(sbx.id, "/work/a.txt", b"alpha", "a.txt")
        cp = self.sc.checkpoint(sbx.id)
        self.assertIsInstance(cp, ps.SandboxCheckpoint)
        self.assertTrue(cp.id.startswith("ver_"), cp.id)
        child = self.sc.create(ps.CreateSandboxRequest(name="child", checkpoint_id=cp.id))
        self.assertEqual(self.fake.calls("POST", "/v1/sandboxes")[-1].body["from_version"], cp.id)
        self.assertEqual(self.sc.read_file(child.id, "/work/a.txt").content, "alpha")
        # a client made with from_version forks it for every create without an image
        forks = DenvSandboxClient(self.sc.client, from_version=cp.id)
        forks.create(ps.CreateSandboxRequest(name="again", docker_image="python:3.11-slim"))
        self.assertEqual(self.fake.calls("POST", "/v1/sandboxes")[-1].body["from_version"], cp.id)

    def test_errors_are_primes(self) -> None:
        sbx = self.sc.create(ps.CreateSandboxRequest(name="x", docker_image="busybox"))
        self.fake.fail = {("POST", ".*/exec"): (504, "exec timed out")}
        with self.assertRaises(ps.CommandTimeoutError):
            self.sc.execute_command(sbx.id, "sleep 9", timeout=1)
        self.fake.fail = {("POST", ".*/exec"): (409, "environment is not running")}
        with self.assertRaises(ps.SandboxNotRunningError):
            self.sc.execute_command(sbx.id, "true")
        self.fake.fail = {("POST", "/v1/sandboxes"): (502, "deployment failed: prepare: image not found")}
        with self.assertRaises(ps.APIError) as cm:
            self.sc.create(ps.CreateSandboxRequest(name="y", docker_image="nope"))
        self.assertIn("image not found", str(cm.exception))
        self.fake.fail = {}
        with self.assertRaises(ps.APIError):
            self.sc.get("env_missing")

    def test_prime_constructor_arguments_are_ignored(self) -> None:
        """Code that builds Prime's client (SandboxClient(APIClient()), AsyncSandboxClient(key)) builds ours."""
        env = {"DENV_SERVER": self.fake.url, "DENV_API_KEY": KEY}
        with mock.patch.dict("os.environ", env):
            sync = DenvSandboxClient(object())
            self.assertEqual(sync.client.server, self.fake.url)
            sync.close()
            self.assertTrue(sync.client._http.is_closed)
            ac = AsyncDenvSandboxClient("prime-key", max_connections=10)
            self.assertEqual(ac.sync.client.api_key, KEY)
        # a denv Client handed in is the caller's: closing ours leaves it open
        self.sc.close()
        self.assertFalse(self.sc.client._http.is_closed)

    def test_async_client(self) -> None:
        async def go() -> None:
            ac = AsyncDenvSandboxClient(self.sc.client, background_job_output_concurrency=100)
            sbx = await ac.create(ps.CreateSandboxRequest(name="a", docker_image="busybox"))
            await ac.wait_for_creation(sbx.id, max_attempts=5)
            await ac.upload_bytes(sbx.id, "/work/x", b"x", filename="x")
            self.assertEqual((await ac.read_file(sbx.id, "/work/x")).content, "x")
            await ac.delete(sbx.id)

        asyncio.run(go())


if __name__ == "__main__":
    unittest.main()
