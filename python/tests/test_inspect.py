"""denv.inspect: the sandbox against the fake REST API, and a real `inspect eval`.

The eval runs the `inspect` CLI in a child process on a task that never imports
denv (fixtures/inspect/marker_task.py), so the sandbox is found through the
`inspect_ai` entry point only; the fake API is backed by Docker for it.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path
from typing import Any, Callable
from unittest import mock

from fakeapi import KEY, DockerBackend, FakeDenv
from test_client import tar_of
from test_harbor import docker_image_present

from denv.client import DenvError

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent
IMAGE = "denv-test/busybox"


WHO = ["sh", "-c", "id -u; id -g; pwd"]


def tar_link(name: str, target: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = tarfile.SYMTYPE, target
        tf.addfile(info)
    return buf.getvalue()


class FakeShell:
    """The fake's exec for the sandbox: answers the adapter's own commands (who
    am I, the file probes, the stdin wrapper, rm) as a shell in the sandbox
    would; anything else through ``other(cmd, stdin)``."""

    def __init__(self, backend: Any, uid: int = 0, gid: int = 0, workdir: str = "/work") -> None:
        self.b = backend
        self.uid, self.gid, self.workdir = uid, gid, workdir
        self.probe: dict[str, str] = {}
        self.marks: list[str] = []
        self.cuts: list[tuple[str, int, int]] = []
        self.stdin_seen: list[tuple[str, bytes, tuple[int, int, int]]] = []
        self.other: Callable[[list[str], bytes | None], tuple[Any, ...]] = lambda cmd, stdin: (0, cmd[-1], "")

    def __call__(self, env: str, svc: str, cmd: list[str], t: int) -> tuple[Any, ...]:
        from denv.client import CUT_PART
        from denv.inspect import LARGE_PROBE, MARK_EXEC, READ_PROBE, WRITE_PROBE
        fs = self.b.files[env]
        if cmd[:3] == ["sh", "-c", MARK_EXEC]:
            self.marks.append(cmd[4])
            cmd = cmd[5:]
        if cmd[:3] == ["sh", "-c", LARGE_PROBE]:
            mode = self.b.meta[env].get(cmd[4], (0o644, 0, 0))[0]
            return 0, f"file {len(fs[cmd[4]])} {mode:o}\n", ""
        if cmd[:3] == ["sh", "-c", CUT_PART]:
            src, part, skip, count = cmd[4], cmd[5], int(cmd[6]) << 20, int(cmd[7]) << 20
            fs[part] = fs[src][skip:skip + count]
            self.cuts.append((src, skip, count))
            return 0, "", ""
        if cmd == WHO:
            return 0, f"{self.uid}\n{self.gid}\n{self.workdir}\n", ""
        if cmd[:2] == ["sh", "-c"] and cmd[2] in (READ_PROBE, WRITE_PROBE):
            path = cmd[4]
            default = "ok" if cmd[2] == WRITE_PROBE or path in fs else "missing"
            return 0, self.probe.get(path, default) + "\n", ""
        if cmd[:2] == ["sh", "-c"] and cmd[2].startswith('exec <"$1"'):
            path = cmd[4]
            data = fs.pop(path)
            self.stdin_seen.append((path, data, self.b.meta[env].pop(path)))
            return self.other(cmd[5:], data)
        if cmd[:3] == ["rm", "-f", "--"]:
            fs.pop(cmd[3], None)
            return 0, "", ""
        return self.other(cmd, None)


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
        self.assertEqual(r.stdout.strip(), "denv.inspect DenvSandbox 8 ['denv.yaml', 'denv.yml', 'compose.yaml', "
                                           "'compose.yml', 'docker-compose.yaml', 'docker-compose.yml']")


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

    def test_compose(self) -> None:
        """A compose file as the config (Inspect's Docker sandbox's way), or named by denv.yaml;
        exec's service as Inspect's Docker sandbox picks its default."""
        from denv.inspect import DenvSandboxConfig, compose_service, resolve_config
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "compose.yaml"
            p.write_text("services:\n  web: {image: a}\n  default: {build: .}\n")
            c = resolve_config(str(p))
            self.assertEqual((c.compose, c.image, c.from_version), (str(p), None, None))
            self.assertEqual(compose_service(str(p), "main"), "default")
            self.assertEqual(compose_service(str(p), "web"), "web")
            p.write_text("services:\n  a: {image: a}\n  b: {image: b, x-default: true}\n")
            self.assertEqual(compose_service(str(p), "main"), "b")
            p.write_text("services:\n  first: {image: a}\n  second: {image: b}\n")
            self.assertEqual(compose_service(str(p), "main"), "first")
            d = Path(tmp) / "sub"
            d.mkdir()
            (d / "denv.yaml").write_text("compose: ../compose.yaml\nservice: second\n")
            c = resolve_config(str(d / "denv.yaml"))
            self.assertEqual(os.path.normpath(str(c.compose)), str(p))
            self.assertEqual(c.service, "second")
            p.write_text("services: {}\n")
            with self.assertRaises(ValueError):
                compose_service(str(p), "main")
        with self.assertRaises(ValueError):
            DenvSandboxConfig(image="a", compose="/x/compose.yaml")


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
            self.assertEqual(body, {"image": "img", "cmd": ["sleep", "infinity"], "egress": "allow", "project": "inspect",
                                    "volumes": ["/work", "/data"], "timeout_sec": 600})
            sh = FakeShell(self.fake.backend)
            sh.other = lambda cmd, stdin: (2, cmd[-1] + "|" + (stdin or b"").decode(), "err")
            self.fake.backend.exec_fn = sh
            r = await sb.exec(["echo", "a b", "it's"], input="IN", cwd="/tmp", env={"K": "v"}, timeout=11)
            self.assertIsInstance(r, ExecResult)
            self.assertEqual((r.success, r.returncode, r.stderr), (False, 2, "err"))
            self.assertTrue(r.stdout.endswith("echo 'a b' 'it'\"'\"'s'|IN"), r.stdout)
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
            await sb.write_file("rel.txt", "r")
            self.assertEqual(self.fake.calls("PUT", ".*/files")[-1].query["path"], "/work")
            # the user and the working directory are asked for once
            self.assertEqual(sum(1 for c in self.fake.calls("POST", ".*/exec") if c.body["cmd"] == WHO), 1)
            # a missing file: the host's 502, then a probe says it does not exist
            with self.assertRaises(FileNotFoundError) as cm:
                await sb.read_file("/nope")
            self.assertEqual(cm.exception.filename, "/nope")
            self.fake.raw_fail[("GET", ".*/files")] = (200, tar_of([("d", None), ("d/f", b"1")]), "application/x-tar")
            with self.assertRaises(IsADirectoryError):
                await sb.read_file("/d")
            self.fake.raw_fail.clear()
            # a timeout surfaces as TimeoutError
            self.fake.fail[("POST", ".*/exec")] = (504, "exec timed out")
            with self.assertRaises(TimeoutError):
                await sb.exec(["sleep", "9"], timeout=1)
            self.fake.fail[("POST", ".*/exec")] = (502, "env.exec: timed out after 1 s (the process was killed)")
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

    async def _sandbox(self, uid: int = 0) -> tuple[Any, "FakeShell"]:
        from denv.inspect import DenvSandbox, DenvSandboxConfig
        envs = await DenvSandbox.sample_init("t", DenvSandboxConfig(image="img"), {})
        sh = FakeShell(self.fake.backend, uid=uid, gid=uid)
        self.fake.backend.exec_fn = sh
        return envs["default"], sh

    def test_exec_output_limits(self) -> None:
        from inspect_ai.util import OutputLimitExceededError
        from inspect_ai.util._sandbox.limits import override_max_exec_output_size
        from denv.client import EXEC_OUTPUT_MAX

        async def go() -> None:
            sb, sh = await self._sandbox()
            # denvd says it cut a stream: what was received comes with the error
            sh.other = lambda cmd, stdin: (0, "head", "tail", True)
            with self.assertRaises(OutputLimitExceededError) as cm:
                await sb.exec(["yes"])
            self.assertEqual(cm.exception.limit_str, "1 MiB")
            self.assertEqual(cm.exception.truncated_output, "headtail")
            self.assertIn("limit of 1 MiB was exceeded", str(cm.exception))
            # without the flag, output is whole, also at exactly the cap
            for out in ("a" * EXEC_OUTPUT_MAX, "\ufffd" * (EXEC_OUTPUT_MAX // 2)):
                sh.other = lambda cmd, stdin, o=out: (0, o, "")
                r = await sb.exec(["cat"])
                self.assertEqual(len(r.stdout), len(out))
            # a program the shell may not run is PermissionError (exit 126, one line)
            sh.other = lambda cmd, stdin: (126, "", "sh: line 1: /etc/passwd: Permission denied\n")
            with self.assertRaises(PermissionError):
                await sb.exec(["/etc/passwd"])
            sh.other = lambda cmd, stdin: (126, "", "tool: x: Permission denied\n")
            self.assertEqual((await sb.exec(["tool"])).returncode, 126)
            # Inspect's own limit, when set below denvd's, is applied too
            sh.other = lambda cmd, stdin: (0, "0123456789", "é")
            with override_max_exec_output_size(4):
                with self.assertRaises(OutputLimitExceededError) as cm:
                    await sb.exec(["cat"])
            self.assertEqual(cm.exception.limit_str, "4 bytes")
            self.assertEqual(cm.exception.truncated_output, "0123é")

        asyncio.run(go())

    def test_stdin_file_per_call(self) -> None:
        from denv.inspect import STDIN_PREFIX

        async def go() -> None:
            sb, sh = await self._sandbox(uid=1000)
            sh.other = lambda cmd, stdin: (0, (stdin or b"").decode(), "")
            self.fake.stall[("POST", ".*/exec")] = 0.2  # both uploads land before either command runs
            ra, rb = await asyncio.gather(sb.exec(["cat"], input="secret-A"), sb.exec(["cat"], input=b"secret-B"))
            self.fake.stall.clear()
            self.assertEqual((ra.stdout, rb.stdout), ("secret-A", "secret-B"))
            paths = [p for p, _, _ in sh.stdin_seen]
            self.assertEqual(len(set(paths)), 2, paths)
            for path, data, meta in sh.stdin_seen:
                self.assertTrue(path.startswith(STDIN_PREFIX) and len(path) == len(STDIN_PREFIX) + 32, path)
                self.assertEqual(meta, (0o600, 1000, 1000), "mode 0600, owned by the service's user")
            # each exec opens its own file and removes it before the command runs
            for c in self.fake.calls("POST", ".*/exec"):
                cmd = c.body["cmd"]
                if cmd[:2] == ["sh", "-c"] and cmd[2].startswith('exec <"$1"'):
                    self.assertIn('rm -f -- "$1"', cmd[2])
                    self.assertIn(cmd[4], paths)
            self.assertFalse([p for p in self.fake.backend.files[sb._env_id] if p.startswith(STDIN_PREFIX)])
            # a failed exec removes the file it uploaded
            self.fake.fail[("POST", ".*/exec")] = (502, "host went away")
            with self.assertRaises(Exception):
                await sb.exec(["cat"], input="x")
            self.fake.fail.clear()
            rm = [c.body["cmd"] for c in self.fake.calls("POST", ".*/exec") if c.body["cmd"][:1] == ["rm"]]
            self.assertEqual(len(rm), 1)
            self.assertTrue(rm[0][-1].startswith(STDIN_PREFIX))

        asyncio.run(go())

    def test_file_errors_root(self) -> None:
        from inspect_ai.util import OutputLimitExceededError
        from inspect_ai.util._sandbox.limits import override_max_read_file_size

        async def go() -> None:
            sb, sh = await self._sandbox()
            for name in ("/work/d/.", "/work/d/..", "/work/d/"):
                with self.assertRaises(IsADirectoryError):
                    await sb.read_file(name)
                with self.assertRaises(IsADirectoryError):
                    await sb.write_file(name, "x")
            # a file its owner may not read, as Inspect's Docker sandbox reports it
            self.fake.backend.files[sb._env_id]["/work/locked"] = b"s"
            self.fake.backend.meta[sb._env_id] = {"/work/locked": (0o200, 0, 0)}
            with self.assertRaises(PermissionError) as cm:
                await sb.read_file("locked")
            self.assertEqual(cm.exception.filename, "locked")
            # over Inspect's read limit
            await sb.write_file("/work/big", "12345")
            with override_max_read_file_size(4):
                with self.assertRaises(OutputLimitExceededError):
                    await sb.read_file("/work/big")
            self.assertEqual(await sb.read_file("/work/big"), "12345")
            # over denv's archive limit: read in parts of PART_MAX, each cut by dd
            from denv import client as dc
            huge = bytes(range(256)) * ((2 * dc.PART_MAX + 1000) // 256)
            self.fake.backend.files[sb._env_id]["/work/huge"] = huge
            plain_get = sb._client.get_tar

            def capped(env: str, svc: str, path: str) -> bytes:
                if path == "/work/huge":
                    raise DenvError("GET", "/files", 502, "files: env.get: archive larger than 32 MiB")
                return plain_get(env, svc, path)
            sb._client.get_tar = capped  # type: ignore[method-assign]
            self.assertEqual(await sb.read_file("/work/huge", text=False), huge)
            self.assertEqual([(c[1], c[2]) for c in sh.cuts],
                             [(0, dc.PART_MAX), (dc.PART_MAX, dc.PART_MAX), (2 * dc.PART_MAX, dc.PART_MAX)])
            self.assertFalse([p for p in self.fake.backend.files[sb._env_id] if p.startswith("/tmp/.denv_part.")])
            with override_max_read_file_size(1000):
                with self.assertRaises(OutputLimitExceededError):
                    await sb.read_file("/work/huge")
            sb._client.get_tar = plain_get  # type: ignore[method-assign]
            # the host's refusals mapped to the errors Inspect names
            self.fake.fail[("PUT", ".*/files")] = (502, "env.put: docker cp: Error processing tar file(exit status 1): "
                                                        'cannot overwrite directory "/work/d" with non-directory "/work"')
            with self.assertRaises(IsADirectoryError):
                await sb.write_file("/work/d", "x")
            self.fake.fail[("PUT", ".*/files")] = (502, "env.put: docker cp: open /ro/f: permission denied")
            with self.assertRaises(PermissionError) as cm3:
                await sb.write_file("/ro/f", "x")
            self.assertEqual(cm3.exception.filename, "/ro/f")
            self.fake.fail.clear()
            # a symbolic link is followed
            real_get = sb._client.get_tar
            answers = [tar_link("l", "big")]
            sb._client.get_tar = lambda *a: answers.pop() if answers else real_get(*a)
            self.assertEqual(await sb.read_file("/work/l"), "12345")

        asyncio.run(go())

    def test_file_errors_non_root(self) -> None:
        async def go() -> None:
            sb, sh = await self._sandbox(uid=1000)
            fs = self.fake.backend.files[sb._env_id]
            fs["/root/secret"] = b"s"
            # the service's user may not read it, though Docker (root) could
            sh.probe["/root/secret"] = "denied"
            with self.assertRaises(PermissionError) as cm:
                await sb.read_file("/root/secret")
            self.assertEqual(cm.exception.filename, "/root/secret")
            # hidden behind a closed directory: missing to the user, there for root
            sh.probe["/root/secret"] = "missing"
            with self.assertRaises(PermissionError):
                await sb.read_file("/root/secret")
            with self.assertRaises(FileNotFoundError):
                await sb.read_file("/root/none")
            sh.probe["/etc"] = "dir"
            with self.assertRaises(IsADirectoryError):
                await sb.read_file("/etc")
            with self.assertRaises(IsADirectoryError):
                await sb.write_file("/etc", "x")
            puts = len(self.fake.calls("PUT", ".*/files"))
            sh.probe["/etc/passwd"] = "denied"
            with self.assertRaises(PermissionError) as cm2:
                await sb.write_file("/etc/passwd", "x")
            self.assertEqual(cm2.exception.filename, "/etc/passwd")
            self.assertEqual(len(self.fake.calls("PUT", ".*/files")), puts, "nothing was uploaded")
            # what the user may write is written as the user
            await sb.write_file("mine.txt", "m")
            self.assertEqual(self.fake.backend.meta[sb._env_id]["/work/mine.txt"], (0o644, 1000, 1000))
            self.assertEqual(await sb.read_file("mine.txt"), "m")

        asyncio.run(go())

    def test_cli_cleanup_and_info_event(self) -> None:
        from inspect_ai.log import transcript
        from denv.inspect import DenvSandbox, DenvSandboxConfig

        async def go() -> None:
            cfg = DenvSandboxConfig(image="img")
            a = (await DenvSandbox.sample_init("t", cfg, {}))["default"]
            b = (await DenvSandbox.sample_init("t", cfg, {}))["default"]
            info = [e for e in transcript().events if getattr(e, "event", "") == "info" and e.source == "denv"]
            self.assertEqual([e.data["denv_env_id"] for e in info][-2:], [a._env_id, b._env_id])
            self.assertEqual(info[-1].data["image"], "img")
            await DenvSandbox.cli_cleanup(a._env_id)
            self.assertEqual([r.path for r in self.fake.calls("DELETE")], [f"/v1/envs/{a._env_id}"])
            await DenvSandbox.cli_cleanup(None)  # the live one only
            self.assertEqual([r.path for r in self.fake.calls("DELETE")][1:], [f"/v1/envs/{b._env_id}"])
            self.assertEqual(self.fake.calls("GET", "/v1/projects/inspect/envs")[0].method, "GET")

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
