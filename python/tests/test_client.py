"""denv.Client against the fake REST API: requests made, answers read, errors mapped."""

from __future__ import annotations

import errno
import io
import json
import os
import socket
import subprocess
import tarfile
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from fakeapi import KEY, FakeDenv

import asyncio
import inspect

from denv import AsyncClient, Batch, BatchMember, Client, DenvError, DenvTimeout, ExecResult, Sandbox, Verdict
from denv.client import shell_command


def tar_of(entries: list[tuple[str, bytes | None]]) -> bytes:
    """A tar; None content is a directory."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class FakeCase(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeDenv().start()
        self.c = Client(server=self.fake.url, api_key=KEY, timeout=10)
        self.c.poll_interval = 0.01

    def tearDown(self) -> None:
        self.c.close()
        self.fake.stop()


class TestConstruct(unittest.TestCase):
    def test_missing_key(self) -> None:
        with mock.patch.dict(os.environ, {}, clear=True):
            with self.assertRaises(RuntimeError) as cm:
                Client()
        self.assertEqual(str(cm.exception), "DENV_API_KEY is not set")

    def test_defaults_from_environment(self) -> None:
        with mock.patch.dict(os.environ, {"DENV_API_KEY": "dak_x"}, clear=True):
            c = Client()
            self.assertEqual(c.server, "http://localhost:8080")
            self.assertEqual(c.timeout, 900.0)
        with mock.patch.dict(os.environ, {"DENV_API_KEY": "dak_x", "DENV_SERVER": "http://h:1/"}, clear=True):
            self.assertEqual(Client().server, "http://h:1")
        self.assertEqual(Client(server="http://a:2", api_key="dak_y").api_key, "dak_y")


class TestSandboxes(FakeCase):
    def test_value_errors(self) -> None:
        with self.assertRaises(ValueError):
            self.c.sandbox()
        with self.assertRaises(ValueError):
            self.c.sandbox(image="a", from_version="ver_1")
        with self.assertRaises(ValueError):
            self.c.sandbox(image="a", egress="open")
        self.assertEqual(self.fake.requests, [], "nothing is sent on a ValueError")

    def test_image_sandbox(self) -> None:
        sbx = self.c.sandbox(image="busybox", cmd=["sleep", "infinity"], env={"A": "1"}, ports=[8000],
                             egress="allow", volumes=["/work", "/data"], name="n1", project="p", timeout_sec=30)
        self.assertIsInstance(sbx, Sandbox)
        self.assertTrue(sbx.id.startswith("env_"))
        self.assertEqual((sbx.name, sbx.status), ("n1", "healthy"))
        self.assertEqual(sbx.endpoints, {"main": "127.0.0.1:18000"})
        self.assertEqual(sbx.raw["ID"], sbx.id)
        (r,) = self.fake.calls("POST", "/v1/sandboxes")
        self.assertEqual(r.body, {"image": "busybox", "cmd": ["sleep", "infinity"], "env": {"A": "1"},
                                  "ports": ["8000"], "egress": "allow", "volumes": ["/work", "/data"],
                                  "name": "n1", "project": "p", "timeout_sec": 30})
        self.assertEqual(r.headers["authorization"], f"Bearer {KEY}")

    def test_sandbox_ttls_touch_and_set_ttl(self) -> None:
        sbx = self.c.sandbox(image="busybox", idle_ttl_sec=300, max_ttl_sec=0, ttl_action="destroy")
        (r,) = self.fake.calls("POST", "/v1/sandboxes")
        self.assertEqual((r.body["idle_ttl_sec"], r.body["max_ttl_sec"], r.body["ttl_action"]),
                         (300, 0, "destroy"))
        self.c.sandbox(image="busybox")
        self.assertNotIn("idle_ttl_sec", self.fake.calls("POST", "/v1/sandboxes")[-1].body,
                         "unset TTLs are the server's defaults: not sent")
        self.assertIn("idle_expires_at", self.c.touch(sbx.id))
        self.assertEqual(len(self.fake.calls("POST", f"/v1/envs/{sbx.id}/touch")), 1)
        doc = self.c.set_ttl(sbx.id, idle_ttl_sec=60)
        self.assertEqual(doc["environment"]["IdleTTLSec"], 60)
        (p,) = self.fake.calls("PATCH", f"/v1/envs/{sbx.id}")
        self.assertEqual(p.body, {"idle_ttl_sec": 60})
        with self.assertRaises(ValueError):
            self.c.set_ttl(sbx.id)

    def test_version_sandbox_and_current_version(self) -> None:
        a = self.c.sandbox(image="busybox")
        ver = self.c.current_version(a.id)
        self.assertTrue(ver.startswith("ver_"))
        b = self.c.sandbox(from_version=ver)
        self.assertEqual(self.fake.calls("POST", "/v1/sandboxes")[-1].body,
                         {"from_version": ver, "timeout_sec": 600})
        self.assertEqual(b.raw["ParentVersionID"], ver)

    def test_destroy_waits_for_deployment(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.c.destroy(a.id)
        self.assertEqual(len(self.fake.calls("DELETE", f"/v1/envs/{a.id}")), 1)
        self.assertGreaterEqual(len(self.fake.calls("GET", "/v1/deployments/.*")), 2)
        with self.assertRaises(DenvError) as cm:
            self.c.current_version(a.id)
        self.assertEqual(str(cm.exception), f"denv GET /v1/envs/{a.id}: 404 environment not found")

    def test_snapshot_and_fork(self) -> None:
        a = self.c.sandbox(image="busybox")
        v = self.c.snapshot(a.id)
        self.assertEqual(self.c.current_version(a.id), v)
        child = self.c.fork(a.id, name="kid")
        posts = [r.path for r in self.fake.calls("POST")]
        self.assertEqual(posts[-2:], [f"/v1/envs/{a.id}/snapshot", "/v1/sandboxes"])
        self.assertEqual(self.fake.calls("POST", "/v1/sandboxes")[-1].body["name"], "kid")
        self.assertNotEqual(child.id, a.id)
        # live=False: no snapshot, the current version is forked
        n = len(self.fake.calls("POST", ".*/snapshot"))
        self.c.fork(a.id, live=False)
        self.assertEqual(len(self.fake.calls("POST", ".*/snapshot")), n)
        self.assertEqual(self.fake.calls("POST", "/v1/sandboxes")[-1].body["from_version"],
                         self.c.current_version(a.id))

    def test_snapshot_failure(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.fake.snapshot_status = "failed"
        with self.assertRaises(RuntimeError) as cm:
            self.c.snapshot(a.id)
        self.assertEqual(str(cm.exception), f"denv POST /v1/envs/{a.id}/snapshot: failed snapshot: host refused")


class TestDeploy(FakeCase):
    COMPOSE = "services:\n  main: {image: busybox, command: [sleep, infinity]}\n"

    def test_warm_forms(self) -> None:
        self.c.ensure_project("p")
        self.c.deploy("p", self.COMPOSE, warm="psql -f /seed.sql")
        self.c.deploy("p", self.COMPOSE, env="b", warm=["psql", "-f", "/seed.sql"])
        bodies = [r.body.get("warm") for r in self.fake.calls("POST", "/v1/projects/p/deploy")]
        self.assertEqual(bodies, ["psql -f /seed.sql", ["psql", "-f", "/seed.sql"]],
                         "a warm string is sent whole (the server runs it under sh -c), a list as the argv")


class TestVerify(FakeCase):
    def test_verdict(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.fake.verdict = {"reward": 0, "source": "refused", "exit_code": 0,
                             "refused": ["/home/agent/answer.txt: symlink", {"path": "/x", "reason": "fifo"}],
                             "missing": ["/nope"], "agent_frozen": True, "took_ms": 3}
        v = self.c.verify(a.id)
        self.assertIsInstance(v, Verdict)
        self.assertEqual(v.reward, 0.0)
        self.assertEqual(v.refused, ["/home/agent/answer.txt: symlink", "/x: fifo"])
        self.assertEqual((v.missing, v.source, v.status), (["/nope"], "refused", "succeeded"))
        self.assertTrue(v.deployment_id.startswith("dep_"))
        self.assertEqual(v.evidence["took_ms"], 3)
        self.assertEqual(self.fake.calls("POST", ".*/verify")[-1].body, {"resume": False})
        self.c.verify(a.id, resume=True)
        self.assertEqual(self.fake.calls("POST", ".*/verify")[-1].body, {"resume": True})

    def test_failed_verify(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.fake.verify_status = "failed"
        self.fake.verdict = {}
        with self.assertRaises(RuntimeError) as cm:
            self.c.verify(a.id)
        self.assertIn("grade: grader failed", str(cm.exception))
        # a verdict that recorded the failure is returned with reward None
        self.fake.verdict = {"reward": None, "source": "error", "refused": [], "missing": []}
        v = self.c.verify(a.id)
        self.assertEqual((v.reward, v.status, v.source), (None, "failed", "error"))


class TestExecAndFiles(FakeCase):
    def test_exec(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.fake.backend.exec_fn = lambda env, svc, cmd, t: (3, f"{svc}:{' '.join(cmd)}:{t}", "e")
        r = self.c.exec(a.id, "box", ["echo", "hi"], timeout_sec=7)
        self.assertEqual(r, ExecResult(exit_code=3, stdout="box:echo hi:7", stderr="e"))
        self.assertEqual(self.fake.calls("POST", ".*/exec")[-1].body,
                         {"service": "box", "cmd": ["echo", "hi"], "timeout_sec": 7})
        with self.assertRaises(TypeError):
            self.c.exec(a.id, "box", "echo hi")  # type: ignore[arg-type]

    def test_put_bytes_and_get_bytes(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.c.put_bytes(a.id, "main", "/work/a.txt", b"alpha")
        r = self.fake.calls("PUT", ".*/files")[-1]
        self.assertEqual(r.query, {"service": "main", "path": "/work"})
        self.assertEqual(r.headers["content-type"], "application/x-tar")
        with tarfile.open(fileobj=io.BytesIO(r.body)) as tf:
            self.assertEqual(tf.getnames(), ["a.txt"])
        self.assertEqual(self.c.get_bytes(a.id, "main", "/work/a.txt"), b"alpha")
        self.assertEqual(self.fake.calls("GET", ".*/files")[-1].query, {"service": "main", "path": "/work/a.txt"})
        with self.assertRaises(ValueError):
            self.c.put_bytes(a.id, "main", "relative.txt", b"")

    def test_get_bytes_none(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.fake.raw_fail[("GET", ".*/files")] = (200, tar_of([("d", None)]), "application/x-tar")
        with self.assertRaises(IsADirectoryError) as cm:
            self.c.get_bytes(a.id, "main", "/d")
        self.assertEqual(cm.exception.filename, "/d")
        self.fake.raw_fail[("GET", ".*/files")] = (200, b"\0" * 1024, "application/x-tar")
        with self.assertRaises(FileNotFoundError):
            self.c.get_bytes(a.id, "main", "/d")

    def test_get_bytes_os_errors(self) -> None:
        """A host's refusal is the OSError open() raises; only a denial keeps the DenvError."""
        a = self.c.sandbox(image="busybox")
        with self.assertRaises(FileNotFoundError) as cm:
            self.c.get_bytes(a.id, "main", "/work/missing.txt")
        e = cm.exception
        self.assertEqual((e.errno, e.filename), (errno.ENOENT, "/work/missing.txt"))
        self.assertIsNone(e.__cause__)
        self.assertTrue(e.__suppress_context__)
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(FileNotFoundError):
                self.c.get_file(a.id, "main", "/work/missing.txt", Path(tmp) / "out")
            self.assertFalse((Path(tmp) / "out").exists())
        docker = "env.get: docker cp %s: Error response from daemon: "
        cases = [
            ("lstat /var/lib/docker/overlay2/x/merged/f/x: not a directory", NotADirectoryError, errno.ENOTDIR, False),
            ("open /var/lib/docker/x: permission denied", PermissionError, errno.EACCES, True),
            ("No such container:path: c:/x", FileNotFoundError, errno.ENOENT, False),
        ]
        for why, cls, code, chained in cases:
            self.fake.fail = {("GET", ".*/files"): (502, docker % "/f/x" + why)}
            with self.assertRaises(cls) as cm:
                self.c.get_bytes(a.id, "main", "/f/x")
            self.assertEqual((cm.exception.errno, cm.exception.filename), (code, "/f/x"))
            if chained:
                self.assertIsInstance(cm.exception.__cause__, DenvError)
                self.assertIn("permission denied", str(cm.exception.__cause__))
            else:
                self.assertIsNone(cm.exception.__cause__)
        # anything else stays the DenvError: it is not a statement about the file
        for st, msg in ((502, "env.get: archive larger than 32 MiB"), (404, "no such environment")):
            self.fake.fail = {("GET", ".*/files"): (st, msg)}
            with self.assertRaises(DenvError) as cm:
                self.c.get_bytes(a.id, "main", "/f/x")
            self.assertNotIsInstance(cm.exception, OSError)
            self.assertEqual(cm.exception.status, st)

    def test_get_bytes_follows_links(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.c.put_bytes(a.id, "main", "/work/real.txt", b"real")
        answers = {"/work/link": ("link", "real.txt"), "/work/abs": ("abs", "/work/link"),
                   "/work/loop": ("loop", "loop"), "/work/fifo": None}

        def archive(path: str) -> bytes:
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tf:
                if answers[path] is None:
                    info = tarfile.TarInfo("fifo")
                    info.type = tarfile.FIFOTYPE
                else:
                    info = tarfile.TarInfo(answers[path][0])
                    info.type, info.linkname = tarfile.SYMTYPE, answers[path][1]
                tf.addfile(info)
            return buf.getvalue()

        # get_bytes reads through the get_tar operation (a generator shared by both clients).
        real_get = self.c._g_get_tar

        def fake_get(e: str, s: str, p: str):  # type: ignore[no-untyped-def]
            if p in answers:
                return archive(p)
            data = yield from real_get(e, s, p)
            return data

        with mock.patch.object(self.c, "_g_get_tar", fake_get):
            self.assertEqual(self.c.get_bytes(a.id, "main", "/work/link"), b"real")
            self.assertEqual(self.c.get_bytes(a.id, "main", "/work/abs"), b"real")
            with self.assertRaises(OSError) as cm:
                self.c.get_bytes(a.id, "main", "/work/loop")
            self.assertEqual(cm.exception.errno, errno.ELOOP)
            with self.assertRaises(OSError) as cm:
                self.c.get_bytes(a.id, "main", "/work/fifo")
            self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_exec_truncated(self) -> None:
        from denv.client import EXEC_OUTPUT_MAX
        a = self.c.sandbox(image="busybox")
        self.fake.backend.exec_fn = lambda env, svc, cmd, t: (0, "cut", "", True)
        self.assertEqual(self.c.exec(a.id, "box", ["yes"]), ExecResult(0, "cut", "", truncated=True))
        # no flag in the answer: whole, even at exactly denvd's cap
        self.fake.backend.exec_fn = lambda env, svc, cmd, t: (0, "a" * EXEC_OUTPUT_MAX, "")
        self.assertFalse(self.c.exec(a.id, "box", ["x"]).truncated)

    def test_exec_timeout_from_denvd(self) -> None:
        from denv import DenvTimeout
        a = self.c.sandbox(image="busybox")
        self.fake.fail[("POST", ".*/exec")] = (502, "env.exec: timed out after 2 s (the process was killed)")
        with self.assertRaises(DenvTimeout):
            self.c.exec(a.id, "box", ["sleep", "9"], timeout_sec=2)
        self.fake.fail[("POST", ".*/exec")] = (502, "env.exec: environment has no service")
        with self.assertRaises(DenvError) as cm:
            self.c.exec(a.id, "box", ["sleep", "9"], timeout_sec=2)
        self.assertNotIsInstance(cm.exception, TimeoutError)

    def test_put_bytes_owner_and_mode(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.c.put_bytes(a.id, "main", "/tmp/in", b"s", mode=0o600, uid=1000, gid=1001)
        with tarfile.open(fileobj=io.BytesIO(self.fake.calls("PUT", ".*/files")[-1].body)) as tf:
            m = tf.next()
            assert m is not None
            self.assertEqual((m.name, m.mode, m.uid, m.gid), ("in", 0o600, 1000, 1001))

    def test_put_file_and_dir_get_file_and_dir(self) -> None:
        a = self.c.sandbox(image="busybox")
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            (t / "src" / "sub").mkdir(parents=True)
            (t / "src" / "x.sh").write_text("echo x\n")
            (t / "src" / "x.sh").chmod(0o755)
            (t / "src" / "sub" / "y.txt").write_text("y")
            self.c.put_file(a.id, "main", t / "src" / "x.sh", "/opt/run.sh")
            with tarfile.open(fileobj=io.BytesIO(self.fake.calls("PUT")[-1].body)) as tf:
                m = tf.getmember("run.sh")
                self.assertEqual(m.mode & 0o777, 0o755)
            self.c.put_dir(a.id, "main", t / "src", "/work/in")
            r = self.fake.calls("PUT")[-1]
            self.assertEqual(r.query["path"], "/work/in")
            with tarfile.open(fileobj=io.BytesIO(r.body)) as tf:
                self.assertEqual(sorted(tf.getnames()), ["sub", "sub/y.txt", "x.sh"])
            self.assertNotIn("owner", r.query)
            self.c.put_dir(a.id, "main", t / "src", "/work/owned", owner="agent:agent")
            self.assertEqual(self.fake.calls("PUT")[-1].query["owner"], "agent:agent")
            self.c.put_file(a.id, "main", t / "src" / "x.sh", "/opt/own.sh", owner="1000")
            r = self.fake.calls("PUT")[-1]
            self.assertEqual((r.query["path"], r.query["owner"]), ("/opt", "1000"))
            self.c.get_file(a.id, "main", "/opt/run.sh", t / "out" / "run.sh")
            self.assertEqual((t / "out" / "run.sh").read_text(), "echo x\n")
            # docker cp src/. : the contents of /work/in land directly in the target
            self.c.get_dir(a.id, "main", "/work/in", t / "dl")
            self.assertEqual((t / "dl" / "x.sh").read_text(), "echo x\n")
            self.assertEqual((t / "dl" / "sub" / "y.txt").read_text(), "y")
            self.assertFalse((t / "dl" / "in").exists())

    def test_get_dir_relative_archive_and_escape(self) -> None:
        a = self.c.sandbox(image="busybox")
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            self.fake.raw_fail[("GET", ".*/files")] = (
                200, tar_of([(".", None), ("./f", b"1"), ("./in", None), ("./in/g", b"2")]), "application/x-tar")
            self.c.get_dir(a.id, "main", "/logs/verifier", t / "a")
            self.assertEqual((t / "a" / "f").read_bytes(), b"1")
            self.assertEqual((t / "a" / "in" / "g").read_bytes(), b"2")
            self.fake.raw_fail[("GET", ".*/files")] = (
                200, tar_of([("v", None), ("v/../../escape", b"x")]), "application/x-tar")
            with self.assertRaises(tarfile.TarError):
                self.c.get_dir(a.id, "main", "/logs/v", t / "b")
            self.assertFalse((t / "escape").exists())


class TestBatch(FakeCase):
    def test_batch_waits_and_reports_each_change(self) -> None:
        seen: list[tuple[str, str]] = []
        b = self.c.batch(5, image="busybox", cmd=["sleep", "1"], name_prefix="r-", idle_ttl_sec=60,
                         on_change=lambda m: seen.append((m.name, m.state)))
        self.assertIsInstance(b, Batch)
        self.assertTrue(b.done and b.id.startswith("bat_"))
        self.assertEqual([m.name for m in b.members], [f"r-{i}" for i in range(5)])
        self.assertEqual(len(b.healthy), 5)
        self.assertTrue(all(isinstance(m, BatchMember) and m.id.startswith("env_") for m in b.members))
        self.assertEqual(seen, [(f"r-{i}", "pending") for i in range(5)] + [(f"r-{i}", "healthy") for i in range(5)],
                         "each member is reported pending, then healthy, once each")
        (r,) = self.fake.calls("POST", "/v1/sandboxes/batch")
        self.assertEqual(r.body, {"idle_ttl_sec": 60, "egress": "deny", "image": "busybox", "cmd": ["sleep", "1"],
                                  "count": 5, "name_prefix": "r-"})

    def test_partial_failure_is_per_member(self) -> None:
        b = self.c.batch(4, image="flaky")
        self.assertEqual([m.state for m in b.members], ["healthy", "failed", "healthy", "failed"])
        self.assertEqual([m.error for m in b.failed], ["fake: image pull failed"] * 2)

    def test_no_wait_status_and_timeout(self) -> None:
        self.fake.running_polls = 1000
        b = self.c.batch(2, image="a", wait=False)
        self.assertEqual([m.state for m in b.members], ["pending", "pending"])
        self.assertFalse(self.c.batch_status(b.id).done)
        with self.assertRaises(DenvTimeout) as cm:
            self.c.wait_batch(b.id, timeout_sec=0.05)
        self.assertIn("2 members still pending", str(cm.exception))
        with self.assertRaises(ValueError):
            self.c.batch(2)
        with self.assertRaises(DenvError) as err:
            self.c.batch(0, image="a")
        self.assertEqual(err.exception.status, 400)

    def test_metrics_and_logs(self) -> None:
        a = self.c.sandbox(image="busybox")
        m = self.c.metrics(a.id)
        self.assertEqual((m["services"][0]["status"], m["volumes"][0]["name"]), ("running", "work"))
        doc = self.c.logs(a.id, service="main", tail=2, timestamps=True, since="2026-12-01T00:00:00.000000000Z")
        self.assertEqual(doc["stdout"].splitlines()[-1], "2026-12-02T00:00:00.000000000Z line 2")
        (r,) = self.fake.calls("GET", f"/v1/envs/{a.id}/logs")
        self.assertEqual(r.query, {"tail": "2", "service": "main", "timestamps": "true",
                                   "since": "2026-12-01T00:00:00.000000000Z"})
        self.assertEqual(asyncio.run(self._async_logs(a.id))["stderr"], "err\n")

    async def _async_logs(self, env_id: str) -> dict:  # type: ignore[type-arg]
        async with AsyncClient(server=self.fake.url, api_key=KEY, timeout=5) as ac:
            return await ac.logs(env_id)

    def test_idempotency_key_is_sent(self) -> None:
        self.c.batch(1, image="a", idempotency_key="k-1")
        (r,) = self.fake.calls("POST", "/v1/sandboxes/batch")
        self.assertEqual(r.headers["idempotency-key"], "k-1")


class TestAsyncClient(FakeCase):
    def test_same_surface(self) -> None:
        public = [n for n in dir(Client) if not n.startswith("_") and callable(getattr(Client, n))]
        for n in public:
            if n in ("close",):
                continue
            self.assertTrue(hasattr(AsyncClient, n), n)
            self.assertTrue(inspect.iscoroutinefunction(getattr(AsyncClient, n)), n)
            self.assertEqual(inspect.signature(getattr(AsyncClient, n)), inspect.signature(getattr(Client, n)), n)
            self.assertEqual(getattr(AsyncClient, n).__doc__, getattr(Client, n).__doc__, n)
        self.assertIn("sandbox", public)
        self.assertEqual(str(inspect.signature(Client.snapshot).return_annotation), "str")

    def test_type_checkers_see_every_operation(self) -> None:
        """The TYPE_CHECKING list in _Ops (what mypy reads) names every _g_ method."""
        import ast
        import denv.client as mod
        tree = ast.parse(open(mod.__file__, encoding="utf-8").read())
        ops = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "_Ops")
        gens = {f.name for f in ops.body if isinstance(f, ast.FunctionDef) and f.name.startswith("_g_")}
        block = next(n for n in ops.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
        declared = {(a.targets[0].id, a.value.args[0].id) for a in block.body  # type: ignore[attr-defined]
                    if isinstance(a, ast.Assign)}
        self.assertEqual(declared, {(g[3:], g) for g in gens})

    def run_async(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run(coro)

    def test_many_sandboxes_at_once(self) -> None:
        async def main() -> list[ExecResult]:
            async with AsyncClient(server=self.fake.url, api_key=KEY, timeout=10) as ac:
                ac.poll_interval = 0.01
                boxes = await asyncio.gather(*(ac.sandbox(image="busybox", name=f"a{i}") for i in range(10)))
                self.assertEqual(len({b.id for b in boxes}), 10)
                await ac.put_bytes(boxes[0].id, "main", "/work/f", b"\x00\xffbytes")
                self.assertEqual(await ac.get_bytes(boxes[0].id, "main", "/work/f"), b"\x00\xffbytes")
                ver = await ac.snapshot(boxes[0].id)
                fork = await ac.sandbox(from_version=ver)
                self.assertTrue(fork.id.startswith("env_"))
                b = await ac.batch(3, image="busybox")
                self.assertEqual(len(b.healthy), 3)
                out = await asyncio.gather(*(ac.exec(x.id, "main", ["echo", "hi"]) for x in boxes[:3]))
                await asyncio.gather(*(ac.destroy(x.id) for x in boxes))
                return list(out)
        out = self.run_async(main())
        self.assertEqual(len(out), 3)
        self.assertEqual(len(self.fake.calls("POST", "/v1/sandboxes")), 11, "the batch is one call")

    def test_errors_are_the_same(self) -> None:
        async def main() -> None:
            async with AsyncClient(server=self.fake.url, api_key="dak_wrong", timeout=5) as ac:
                with self.assertRaises(DenvError) as cm:
                    await ac.sandbox(image="busybox")
                self.assertEqual(str(cm.exception), "denv POST /v1/sandboxes: 401 invalid API key")
            async with AsyncClient(server=self.fake.url, api_key=KEY, timeout=5) as ac:
                a = await ac.sandbox(image="busybox")
                with self.assertRaises(FileNotFoundError):
                    await ac.get_bytes(a.id, "main", "/nope")
                self.fake.fail = {("POST", f"/v1/envs/{a.id}/exec"): (502, "env.exec: timed out after 1 s")}
                with self.assertRaises(DenvTimeout):
                    await ac.exec(a.id, "main", ["sleep", "9"], timeout_sec=1)
        self.run_async(main())


class TestBackgroundAndPause(FakeCase):
    def test_background_command_round_trip(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.fake.backend.exec_fn = lambda env, svc, cmd, t: (3, "hello world", "warn")
        cid = self.c.start_command(a.id, "box", ["sh", "-c", "x"], timeout_sec=60, idempotency_key="k1")
        start = self.fake.calls("POST", r"/v1/envs/[^/]+/commands")[-1]
        self.assertEqual(start.body, {"service": "box", "cmd": ["sh", "-c", "x"], "timeout_sec": 60})
        self.assertEqual(start.headers.get("idempotency-key"), "k1")
        self.assertEqual([c["id"] for c in self.c.commands(a.id)], [cid])
        self.assertEqual(self.c.command(a.id, cid)["exit_code"], 3)
        o = self.c.command_output(a.id, cid)
        self.assertEqual((o.stdout, o.stderr, o.done, o.exit_code, o.stdout_offset), (b"hello world", b"warn", True, 3, 11))
        o2 = self.c.command_output(a.id, cid, stdout_offset=6, stderr_offset=4, wait=5)
        self.assertEqual((o2.stdout, o2.stderr), (b"world", b""))
        q = self.fake.calls("GET", r".*/output")[-1].query
        self.assertEqual(q, {"stdout_offset": "6", "stderr_offset": "4", "wait": "5"})
        self.assertTrue(self.c.wait_command(a.id, cid, timeout_sec=7)["done"])
        self.assertEqual(self.fake.calls("POST", r".*/wait")[-1].body, {"timeout_sec": 7})
        with self.assertRaises(DenvError) as cm:
            self.c.kill_command(a.id, cid)
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(self.fake.calls("POST", r".*/signal")[-1].body, {"signal": "KILL"})
        with self.assertRaises(DenvError) as cm:
            self.c.command(a.id, "bg_nope")
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(TypeError):
            self.c.start_command(a.id, "box", "echo hi")  # type: ignore[arg-type]

    def test_pause_resume(self) -> None:
        a = self.c.sandbox(image="busybox")
        r = self.c.pause(a.id)
        self.assertEqual((r["paused"], r["environment"]["Paused"]), (["box"], True))
        self.assertEqual(self.fake.calls("POST", r".*/pause")[-1].body, {})
        r = self.c.resume(a.id, service="box")
        self.assertEqual((r["resumed"], r["environment"]["Paused"]), (["box"], False))
        self.assertEqual(self.fake.calls("POST", r".*/resume")[-1].body, {"service": "box"})


class TestErrors(FakeCase):
    def test_bad_key_is_401(self) -> None:
        c = Client(server=self.fake.url, api_key="dak_wrong", timeout=5)
        with self.assertRaises(DenvError) as cm:
            c.sandbox(image="busybox")
        self.assertEqual(str(cm.exception), "denv POST /v1/sandboxes: 401 invalid API key")
        self.assertEqual(cm.exception.status, 401)
        self.assertIsInstance(cm.exception, RuntimeError)

    def test_4xx_5xx_mapping(self) -> None:
        cases = [
            ("POST", "/v1/sandboxes", 400, "image or from_version is required"),
            ("POST", "/v1/sandboxes", 409, "name exists"),
            ("POST", "/v1/sandboxes", 502, "deployment failed: prepare: image not found"),
            ("POST", "/v1/sandboxes", 503, "feature not configured"),
        ]
        for method, path, status, msg in cases:
            self.fake.fail = {(method, path): (status, msg)}
            with self.assertRaises(DenvError) as cm:
                self.c.sandbox(image="x")
            self.assertEqual(str(cm.exception), f"denv {method} {path}: {status} {msg}")
            self.assertNotIsInstance(cm.exception, TimeoutError)

    def test_504_is_timeout(self) -> None:
        self.fake.fail = {("POST", "/v1/sandboxes"): (504, "sandbox did not become healthy in time")}
        with self.assertRaises(TimeoutError) as cm:
            self.c.sandbox(image="x")
        self.assertIsInstance(cm.exception, DenvTimeout)
        self.assertEqual(str(cm.exception), "denv POST /v1/sandboxes: 504 sandbox did not become healthy in time")

    def test_non_json_and_empty_error_bodies(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.fake.raw_fail[("GET", ".*/files")] = (502, b"host said no\n", "text/plain")
        with self.assertRaises(DenvError) as cm:
            self.c.get_tar(a.id, "main", "/x")
        self.assertEqual(str(cm.exception), f"denv GET /v1/envs/{a.id}/files: 502 host said no")
        self.fake.raw_fail[("GET", ".*/files")] = (500, b"", "text/plain")
        with self.assertRaises(DenvError) as cm:
            self.c.get_tar(a.id, "main", "/x")
        self.assertEqual(str(cm.exception), f"denv GET /v1/envs/{a.id}/files: 500 Internal Server Error")

    def test_http_timeout(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.fake.stall[("GET", f"/v1/envs/{a.id}")] = 1.5
        c = Client(server=self.fake.url, api_key=KEY, timeout=0.3)
        with self.assertRaises(DenvTimeout) as cm:
            c.current_version(a.id)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertEqual(str(cm.exception), f"denv GET /v1/envs/{a.id}: timeout no answer within 0.3 s")

    def test_deployment_wait_timeout(self) -> None:
        a = self.c.sandbox(image="busybox")
        self.fake.running_polls = 10**6
        with self.assertRaises(DenvTimeout) as cm:
            self.c.snapshot(a.id, timeout_sec=0.2)  # type: ignore[arg-type]
        self.assertIn("deployment not finished within 0.2 s", str(cm.exception))

    def test_unreachable(self) -> None:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        c = Client(server=f"http://127.0.0.1:{port}", api_key=KEY, timeout=2)
        with self.assertRaises(DenvError) as cm:
            c.current_version("env_x")
        self.assertTrue(str(cm.exception).startswith("denv GET /v1/envs/env_x: unreachable http://127.0.0.1:"))


class TestShellCommand(unittest.TestCase):
    def run_argv(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30)

    def test_plain_env_cwd(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            argv = shell_command('echo "$A|$B|$(pwd)"; echo "$0" >&2',
                                 cwd=tmp, env={"A": "x y", "B": "it's $HOME"})
            self.assertEqual(argv[:2], ["sh", "-c"])
            r = self.run_argv(argv)
            self.assertEqual(r.stdout, f"x y|it's $HOME|{os.path.realpath(tmp)}\n")
            self.assertEqual(r.returncode, 0)

    def test_bash_when_present(self) -> None:
        r = self.run_argv(shell_command('echo "${BASH_VERSION:+bash}"'))
        has_bash = subprocess.run(["sh", "-c", "command -v bash"], capture_output=True).returncode == 0
        self.assertEqual(r.stdout.strip(), "bash" if has_bash else "")

    def test_failed_cd_fails(self) -> None:
        r = self.run_argv(shell_command("echo ran", cwd="/nonexistent/dir"))
        self.assertNotEqual(r.returncode, 0)
        self.assertNotIn("ran", r.stdout)

    def test_exit_code_and_multiline(self) -> None:
        r = self.run_argv(shell_command("x=1\nif [ $x = 1 ]; then exit 7; fi"))
        self.assertEqual(r.returncode, 7)

    def test_user(self) -> None:
        self.assertEqual(shell_command("id", user="root")[0], "sh")
        self.assertEqual(shell_command("id", user=0)[0], "sh")
        argv = shell_command("id -u", user="agent", env={"K": "v"})
        self.assertEqual(argv[:4], ["su", "-s", "/bin/sh", "agent"])
        self.assertEqual(argv[4], "-c")
        self.assertIn("export K=v", argv[5])
        argv = shell_command("id -u", user=1000)
        self.assertEqual(argv[:2], ["sh", "-c"])
        self.assertIn("$3==1000", argv[2])
        with self.assertRaises(ValueError):
            shell_command("true", env={"BAD-NAME": "1"})


class TestFileParts(FakeCase):
    """Files over PART_MAX move in parts: joined by JOIN_PARTS, cut by CUT_PART."""

    def test_put_and_get_in_parts(self) -> None:
        from unittest import mock
        from denv import client as dc
        env = self.c.sandbox(image="x").id
        fs = self.fake.backend.files[env]
        joined: list[list[str]] = []

        def shell(e: str, svc: str, cmd: list[str], t: int) -> tuple[Any, ...]:
            if cmd[:3] == ["sh", "-c", dc.JOIN_PARTS]:
                target, parts = cmd[4], cmd[7:]
                joined.append(parts)
                fs[target] = b"".join(fs.pop(p) for p in parts)
                return 0, "", ""
            if cmd[:3] == ["sh", "-c", dc.CUT_PART]:
                src, part, skip, count = cmd[4], cmd[5], int(cmd[6]), int(cmd[7])
                fs[part] = fs[src][skip << 20:(skip + count) << 20]
                return 0, "", ""
            if cmd[:3] == ["sh", "-c", 'wc -c <"$1"']:
                return 0, f"{len(fs[cmd[4]])}\n", ""
            if cmd[:3] == ["rm", "-f", "--"]:
                for p in cmd[3:]:
                    fs.pop(p, None)
                return 0, "", ""
            return 1, "", "unexpected"
        self.fake.backend.exec_fn = shell
        data = os.urandom((2 << 20) + 1234)
        with mock.patch.object(dc, "PART_MAX", 1 << 20):
            self.c.put_bytes(env, "main", "/work/big", data, mode=0o640, uid=7, gid=8)
            self.assertEqual(fs["/work/big"], data)
            self.assertEqual(len(joined[0]), 3)
            self.assertTrue(all(p.startswith(dc.PART_DIR + "/" + dc.PART_NAME) for p in joined[0]))
            self.assertFalse([p for p in fs if p.startswith("/tmp/")], "parts left behind")
            self.assertEqual(self.c.get_parts(env, "main", "/work/big", len(data)), data)
            self.assertFalse([p for p in fs if p.startswith("/tmp/")], "read parts left behind")
            # the API's refusal of the whole file sends get_bytes to the parts
            plain = self.c.get_tar

            def capped(e: str, svc: str, path: str) -> bytes:
                if path == "/work/big":
                    raise DenvError("GET", "/files", 413, "archive larger than 32 MiB")
                return plain(e, svc, path)
            self.c.get_tar = capped  # type: ignore[method-assign]
            self.assertEqual(self.c.get_bytes(env, "main", "/work/big"), data)


if __name__ == "__main__":
    unittest.main()
