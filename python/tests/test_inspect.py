"""denv.inspect: the sandbox against the fake REST API, and a real `inspect eval`.

The eval runs the `inspect` CLI in a child process on a task that never imports
denv (fixtures/inspect/marker_task.py), so the sandbox is found through the
`inspect_ai` entry point only; the fake API is backed by Docker for it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

from fakeapi import KEY, DockerBackend, FakeDenv
from test_client import tar_of
from test_harbor import docker_image_present

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
IMAGE = "denv-test/busybox"


class TestEntryPoint(unittest.TestCase):
    def test_registry_resolves_denv_without_import(self) -> None:
        code = (
            "import sys\n"
            "from inspect_ai.util._sandbox.registry import registry_find_sandboxenv\n"
            "assert 'denv' not in sys.modules\n"
            "cls = registry_find_sandboxenv('denv')\n"
            "print(cls.__module__, cls.__name__, cls.default_concurrency(), cls.config_files())\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           cwd=tempfile.gettempdir())
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(r.stdout.strip(), "denv.inspect DenvSandbox 8 ['denv.yaml', 'denv.yml']")


class TestConfig(unittest.TestCase):
    def test_resolve(self) -> None:
        from denv.inspect import DenvSandboxConfig, resolve_config
        with mock.patch.dict(os.environ, {"DENV_SANDBOX_IMAGE": ""}):
            self.assertEqual(resolve_config(None).image, "python:3.12-slim")
        with mock.patch.dict(os.environ, {"DENV_SANDBOX_IMAGE": "img:1"}):
            self.assertEqual(resolve_config(None).image, "img:1")
        c = resolve_config("ver_01ABC")
        self.assertEqual((c.from_version, c.image, c.service, c.egress), ("ver_01ABC", None, "main", "deny"))
        with self.assertRaises(ValueError):
            resolve_config("python:3.12-slim")
        inline = DenvSandboxConfig(image="x")
        self.assertIs(resolve_config(inline), inline)
        self.assertEqual(inline.volumes, ["/work"])
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "denv.yaml"
            p.write_text("from_version: ver_9\nservice: opsbox\negress: allow\n")
            c = resolve_config(str(p))
            self.assertEqual((c.from_version, c.service, c.egress), ("ver_9", "opsbox", "allow"))
            p.write_text("image: a\nbogus: 1\n")
            with self.assertRaises(ValueError):
                resolve_config(str(p))
        with self.assertRaises(ValueError):
            DenvSandboxConfig()
        with self.assertRaises(ValueError):
            DenvSandboxConfig(image="a", from_version="ver_1")
        with self.assertRaises(ValueError):
            DenvSandboxConfig(image="a", egress="open")  # type: ignore[arg-type]
        from denv.inspect import DenvSandbox
        self.assertEqual(DenvSandbox.config_deserialize({"image": "z"}), DenvSandboxConfig(image="z"))


class TestSandboxAgainstFake(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakeDenv().start()
        self.env = mock.patch.dict(os.environ, {"DENV_SERVER": self.fake.url, "DENV_API_KEY": KEY})
        self.env.start()

    def tearDown(self) -> None:
        self.env.stop()
        self.fake.stop()

    def test_task_init_needs_key(self) -> None:
        from denv.inspect import DenvSandbox
        with mock.patch.dict(os.environ, {"DENV_API_KEY": ""}):
            with self.assertRaises(RuntimeError) as cm:
                asyncio.run(DenvSandbox.task_init("t", None))
            self.assertEqual(str(cm.exception), "DENV_API_KEY is not set")
        asyncio.run(DenvSandbox.task_init("t", None))
        self.assertEqual(self.fake.requests, [])

    def test_lifecycle_exec_files(self) -> None:
        from inspect_ai.util import ExecResult
        from denv.inspect import DenvSandbox, DenvSandboxConfig

        async def go() -> None:
            cfg = DenvSandboxConfig(image="img", egress="allow", volumes=["/work", "/data"])
            envs = await DenvSandbox.sample_init("t", cfg, {})
            self.assertEqual(list(envs), ["default"])
            sb = envs["default"]
            assert isinstance(sb, DenvSandbox)
            body = self.fake.calls("POST", "/v1/sandboxes")[0].body
            self.assertEqual(body, {"image": "img", "cmd": ["sleep", "infinity"], "egress": "allow",
                                    "volumes": ["/work", "/data"], "timeout_sec": 600})
            self.fake.backend.exec_fn = lambda e, s, cmd, t: (2, cmd[-1], "err")
            r = await sb.exec(["echo", "a b", "it's"], input="IN", cwd="/tmp", env={"K": "v"}, timeout=11)
            self.assertIsInstance(r, ExecResult)
            self.assertEqual((r.success, r.returncode, r.stderr), (False, 2, "err"))
            self.assertTrue(r.stdout.endswith("echo 'a b' 'it'\"'\"'s' < /tmp/.denv_stdin"), r.stdout)
            self.assertIn("export K=v", r.stdout)
            put = self.fake.calls("PUT", ".*/files")[0]
            self.assertEqual(put.query, {"service": "main", "path": "/tmp"})
            self.assertEqual(self.fake.calls("POST", ".*/exec")[-1].body["timeout_sec"], 11)
            await sb.exec(["true"])
            self.assertEqual(self.fake.calls("POST", ".*/exec")[-1].body["timeout_sec"], 300)
            await sb.write_file("/work/x/y.txt", "text\r\n")
            self.assertEqual(await sb.read_file("/work/x/y.txt"), "text\r\n")
            await sb.write_file("/work/b.bin", b"\x00\x01")
            self.assertEqual(await sb.read_file("/work/b.bin", text=False), b"\x00\x01")
            # relative paths resolve against the working directory (from `pwd`)
            self.fake.backend.exec_fn = lambda e, s, cmd, t: (0, "/work\n", "")
            await sb.write_file("rel.txt", "r")
            self.assertEqual(self.fake.calls("PUT", ".*/files")[-1].query["path"], "/work")
            # a missing file: the host's 502, then a probe says it does not exist
            self.fake.backend.exec_fn = lambda e, s, cmd, t: (1, "", "")
            with self.assertRaises(FileNotFoundError):
                await sb.read_file("/nope")
            self.fake.raw_fail[("GET", ".*/files")] = (200, tar_of([("d", None), ("d/f", b"1")]), "application/x-tar")
            with self.assertRaises(IsADirectoryError):
                await sb.read_file("/d")
            self.fake.raw_fail.clear()
            # a timeout surfaces as TimeoutError
            self.fake.fail[("POST", ".*/exec")] = (504, "exec timed out")
            with self.assertRaises(TimeoutError):
                await sb.exec(["sleep", "9"], timeout=1)
            self.fake.fail.clear()
            conn = await sb.connection()
            self.assertEqual(conn.command, f"denv exec --service main {sb._env_id} -- sh")
            self.assertEqual(conn.type, "denv")
            await DenvSandbox.sample_cleanup("t", cfg, envs, False)
            self.assertEqual([r.path for r in self.fake.calls("DELETE")], [f"/v1/envs/{sb._env_id}"])
            await DenvSandbox.task_cleanup("t", cfg, True)
            await DenvSandbox.cli_cleanup(None)

        asyncio.run(go())

    def test_version_sample(self) -> None:
        from denv.inspect import DenvSandbox
        from denv import Client
        c = Client()
        v = c.current_version(c.sandbox(image="img").id)

        async def go() -> None:
            envs = await DenvSandbox.sample_init("t", v, {})
            self.assertEqual(self.fake.calls("POST", "/v1/sandboxes")[-1].body,
                             {"from_version": v, "timeout_sec": 600})
            await DenvSandbox.sample_cleanup("t", v, envs, True)

        asyncio.run(go())


@unittest.skipUnless(docker_image_present(IMAGE), f"Docker with the fixture image {IMAGE} is needed")
class TestInspectEval(unittest.TestCase):
    def test_eval_mockllm_accuracy_1(self) -> None:
        from inspect_ai.log import read_eval_log

        tmp = Path(tempfile.mkdtemp())
        fake = FakeDenv(backend=DockerBackend(label=f"inspect{os.getpid()}")).start()
        try:
            src = (HERE / "fixtures" / "inspect" / "marker_task.py").read_text()
            self.assertNotRegex(src, r"(?m)^\s*(import|from)\s+denv", "the task must not import denv")
            (tmp / "marker_task.py").write_text(src)
            (tmp / "denv.yaml").write_text(f"image: {IMAGE}\nvolumes: [/work]\n")
            env = dict(os.environ, DENV_SERVER=fake.url, DENV_API_KEY=KEY, HOME=str(tmp),
                       INSPECT_LOG_DIR=str(tmp / "logs"), NO_COLOR="1", INSPECT_DISPLAY="plain")
            env.pop("INSPECT_EVAL_MODEL", None)
            r = subprocess.run([str(VENV_BIN / "inspect"), "eval", "marker_task.py", "--log-dir", str(tmp / "logs")],
                               capture_output=True, text=True, timeout=600, env=env, cwd=tmp)
            logs = sorted((tmp / "logs").glob("*.eval"))
            self.assertTrue(logs, f"no eval log\nstdout:{r.stdout[-3000:]}\nstderr:{r.stderr[-3000:]}")
            log = read_eval_log(str(logs[-1]))
            self.assertEqual(log.status, "success", f"{log.error}\n{r.stderr[-3000:]}")
            assert log.results is not None
            acc = log.results.scores[0].metrics["accuracy"].value
            self.assertEqual(acc, 1.0, [s.scores for s in (log.samples or [])])
            self.assertEqual(log.eval.sandbox.type if log.eval.sandbox else None, "denv")
            self.assertEqual(len(fake.calls("POST", "/v1/sandboxes")), 2, "one environment per sample")
            self.assertEqual(len(fake.calls("DELETE")), 2, "every sample's environment is destroyed")
            self.assertEqual(fake.backend.containers, {})
        finally:
            fake.stop()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
