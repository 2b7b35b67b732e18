"""denv.harbor.DenvEnvironment: on Harbor's real BaseEnvironment, against the fake REST API.

The last test runs the real ``harbor run -a oracle -e denv.harbor:DenvEnvironment``
end to end, with the fake API backed by real Docker containers (skipped when
Docker or the fixture image is missing).
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

from fakeapi import KEY, DockerBackend, FakeDenv

from harbor.environments.base import BaseEnvironment
from harbor.models.task.config import TaskConfig
from harbor.models.trial.paths import TrialPaths
from harbor.utils.import_path import import_class

from denv import Client
import yaml
from harbor.models.trial.config import ResourceMode

from denv import harbor as dh
from denv.harbor import IDLE_CMD, DenvEnvironment, DenvRefusal, env_name_for

HERE = Path(__file__).resolve().parent
TASK = HERE / "fixtures" / "harbor" / "hello"
VENV_BIN = Path(sys.executable).parent
FIXTURE_IMAGE = "denv-test/debian"


def docker_image_present(image: str) -> bool:
    if not shutil.which("docker"):
        return False
    r = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
    return r.returncode == 0


def make_task(root: Path, toml: str, files: dict[str, str] | None = None) -> Path:
    (root / "environment").mkdir(parents=True, exist_ok=True)
    (root / "task.toml").write_text(toml)
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def make_env(task: Path, trial: Path, client: Client | None = None, session_id: str = "hello__AbC.1__env",
             **kw: Any) -> DenvEnvironment:
    cfg = TaskConfig.model_validate_toml((task / "task.toml").read_text())
    tp = TrialPaths(trial)
    tp.mkdir()
    return DenvEnvironment(
        environment_dir=task / "environment", environment_name="t", session_id=session_id,
        trial_paths=tp, task_env_config=cfg.environment, client=client, **kw,
    )


IMAGE_TOML = '[environment]\ndocker_image = "denv-test/busybox"\nworkdir = "/srv/w"\n'


class TestDefinition(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp())

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_import_path_like_dash_e(self) -> None:
        cls = import_class("denv.harbor:DenvEnvironment", base=BaseEnvironment, label="environment")
        self.assertIs(cls, DenvEnvironment)
        self.assertEqual(cls.type(), "denv")

    def test_image_task(self) -> None:
        env = make_env(make_task(self.tmp / "t", IMAGE_TOML), self.tmp / "trial", client=Client("http://x", "dak_x"))
        caps = env.capabilities
        self.assertTrue(caps.disable_internet and caps.docker_compose)
        self.assertFalse(caps.mounted)
        self.assertFalse(env._uses_compose)
        self.assertEqual(env.egress(), "deny")

    def test_dockerfile_only_is_built(self) -> None:
        task = make_task(self.tmp / "t", '[environment]\nnetwork_mode = "public"\nworkdir = "/w"\n',
                         {"environment/Dockerfile": "FROM scratch\n"})
        env = make_env(task, self.tmp / "trial")
        doc = yaml.safe_load(env.compose_text())
        main = doc["services"]["main"]
        self.assertEqual(main["build"], {"context": ".", "dockerfile": "Dockerfile"})
        self.assertEqual(main["command"], IDLE_CMD)
        self.assertEqual(main["volumes"], ["v0:/app", "v1:/logs", "v2:/w"])
        self.assertEqual(set(doc["volumes"]), {"v0", "v1", "v2"})
        self.assertEqual(doc["x-denv"], {"egress": "allow"})
        self.assertIsNone(env.refusal())

    def test_caps(self) -> None:
        toml = IMAGE_TOML + "cpus = 1.5\nmemory_mb = 512\n"
        env = make_env(make_task(self.tmp / "t", toml), self.tmp / "trial")
        self.assertEqual(env.caps(), {"cpus": 1.5, "mem_limit": "512m"})
        main = yaml.safe_load(env.compose_text())["services"]["main"]
        self.assertEqual((main["image"], main["cpus"], main["mem_limit"]), ("denv-test/busybox", 1.5, "512m"))
        env = make_env(make_task(self.tmp / "t2", toml), self.tmp / "trial2",
                       cpu_enforcement_policy=ResourceMode.IGNORE, memory_enforcement_policy=ResourceMode.LIMIT)
        self.assertEqual(env.caps(), {"mem_limit": "512m"})
        rc = DenvEnvironment.resource_capabilities()
        self.assertTrue(rc.cpu_limit and rc.memory_limit and rc.fractional_cpus)
        self.assertFalse(rc.cpu_request or rc.memory_request)
        # a compose task's main service gets the caps it does not set itself
        task = make_task(self.tmp / "c", "[environment]\ncpus = 2\nmemory_mb = 256\n", {
            "environment/docker-compose.yaml": "services:\n  main: {image: x, cpus: 0.5}\n  db: {image: y}\n"})
        doc = yaml.safe_load(make_env(task, self.tmp / "ctrial").compose_text())
        self.assertEqual(doc["services"]["main"], {"image": "x", "cpus": 0.5, "mem_limit": "256m"})
        self.assertEqual(doc["services"]["db"], {"image": "y"})
        self.assertEqual(doc["x-denv"], {"egress": "deny"})
        task = make_task(self.tmp / "p", '[environment]\nnetwork_mode = "public"\n', {
            "environment/docker-compose.yaml": "x-denv: {warm: [x]}\nservices:\n  main: {image: x}\n"})
        doc = yaml.safe_load(make_env(task, self.tmp / "ptrial").compose_text())
        self.assertEqual(doc["x-denv"], {"egress": "allow", "warm": ["x"]})
        task = make_task(self.tmp / "q", '[environment]\nnetwork_mode = "public"\n', {
            "environment/docker-compose.yaml": "x-denv: {egress: deny}\nservices:\n  main: {image: x}\n"})
        self.assertEqual(yaml.safe_load(make_env(task, self.tmp / "qtrial").compose_text())["x-denv"], {"egress": "deny"})

    def test_refusals_wait_for_start(self) -> None:
        # Raised from the constructor they would end the whole harbor job.
        for toml, words in [
            (IMAGE_TOML + "gpus = 1\n", "1 GPU(s)"),
            (IMAGE_TOML + 'os = "windows"\n', "windows"),
            (IMAGE_TOML + "storage_mb = 2048\n", "storage_mb = 2048, and denv cannot enforce it (x-denv.disk caps the volumes"),
        ]:
            d = Path(tempfile.mkdtemp(dir=self.tmp))
            env = make_env(make_task(d / "t", toml), d / "trial", client=Client("http://127.0.0.1:9", "dak_x"))
            with self.assertRaises(DenvRefusal) as cm:
                asyncio.run(env.start(force_build=False))
            self.assertIn(words, str(cm.exception))
            self.assertTrue(str(cm.exception).startswith("denv: "), str(cm.exception))
        env = make_env(make_task(self.tmp / "l", IMAGE_TOML), self.tmp / "ltrial",
                       cpu_enforcement_policy=ResourceMode.LIMIT)
        self.assertIn("requires a task value", env.refusal() or "")
        env = make_env(make_task(self.tmp / "s", IMAGE_TOML + "storage_mb = 2048\n"), self.tmp / "strial",
                       storage="ignore")
        self.assertIsNone(env.refusal())
        with self.assertRaises(ValueError):
            make_env(make_task(self.tmp / "s2", IMAGE_TOML), self.tmp / "s2trial", storage="maybe")

    def test_no_definition(self) -> None:
        with self.assertRaises(FileNotFoundError):
            make_env(make_task(self.tmp / "t", "[environment]\n"), self.tmp / "trial")

    def test_compose_task(self) -> None:
        for name in ("docker-compose.yaml", "docker-compose.yml"):
            task = make_task(self.tmp / name, "[environment]\n", {f"environment/{name}": "services: {main: {image: x}}\n"})
            self.assertTrue(make_env(task, self.tmp / (name + "trial"))._uses_compose)

    def test_egress(self) -> None:
        for toml, want in [
            (IMAGE_TOML + "allow_internet = true\n", "allow"),
            (IMAGE_TOML + "allow_internet = false\n", "deny"),
            (IMAGE_TOML + 'network_mode = "public"\n', "allow"),
            (IMAGE_TOML + 'network_mode = "no-network"\n', "deny"),
        ]:
            d = Path(tempfile.mkdtemp(dir=self.tmp))
            self.assertEqual(make_env(make_task(d / "t", toml), d / "trial").egress(), want, toml)

    def test_env_name(self) -> None:
        self.assertEqual(env_name_for("hello__AbC.1__env"), "harbor-hello__AbC.1__env")
        self.assertEqual(env_name_for("a b/c"), "harbor-a-b-c")
        self.assertLessEqual(len(env_name_for("x" * 200)), 63)


class TestAgainstFake(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp())
        self.fake = FakeDenv().start()
        self.client = Client(self.fake.url, KEY, timeout=10)
        self.client.poll_interval = 0.01
        self.execs: list[list[str]] = []

        def ex(env: str, svc: str, cmd: list[str], t: int) -> tuple[int, str, str]:
            self.execs.append(cmd)
            return 0, "out", ""
        self.fake.backend.exec_fn = ex

    def tearDown(self) -> None:
        self.fake.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_image_lifecycle(self) -> None:
        env = make_env(make_task(self.tmp / "t", IMAGE_TOML + 'env = { TASK_VAR = "1" }\n'), self.tmp / "trial",
                       client=self.client, persistent_env={"P": "2"})
        asyncio.run(env.start(force_build=False))
        (r,) = self.fake.calls("POST", "/v1/sandboxes")
        self.assertEqual(r.body["image"], "denv-test/busybox")
        self.assertEqual(r.body["cmd"], ["sleep", "infinity"])
        self.assertEqual(r.body["volumes"], ["/app", "/logs", "/srv/w"])
        self.assertEqual(r.body["egress"], "deny")
        self.assertEqual(r.body["env"], {"TASK_VAR": "1", "P": "2"})
        mk = self.execs[0][-1]
        for d in ("/logs/agent", "/logs/verifier", "/logs/artifacts", "/tests", "/solution", "/app"):
            self.assertIn(d, mk)
        res = asyncio.run(env.exec("echo hi", env={"E": "3"}, user="agent", timeout_sec=9))
        self.assertEqual((res.stdout, res.return_code), ("out", 0))
        body = self.fake.calls("POST", ".*/exec")[-1].body
        self.assertEqual(body["timeout_sec"], 9)
        self.assertEqual(body["service"], "main")
        self.assertEqual(body["cmd"][:4], ["su", "-s", "/bin/sh", "agent"])
        self.assertIn("export P=2", body["cmd"][-1])
        self.assertIn("export E=3", body["cmd"][-1])
        self.assertIn("cd -- /srv/w", body["cmd"][-1])
        asyncio.run(env.exec("true"))
        self.assertEqual(self.fake.calls("POST", ".*/exec")[-1].body["timeout_sec"], 600)
        asyncio.run(env.upload_file(TASK / "solution" / "solve.sh", "/solution/solve.sh"))
        self.assertEqual(self.fake.calls("PUT", ".*/files")[-1].query["path"], "/solution")
        asyncio.run(env.upload_dir(TASK / "tests", "/tests"))
        asyncio.run(env.download_file("/tests/test.sh", self.tmp / "dl" / "t.sh"))
        self.assertTrue((self.tmp / "dl" / "t.sh").read_text().startswith("#!/bin/bash"))
        asyncio.run(env.download_dir("/tests", self.tmp / "dl2"))
        self.assertTrue((self.tmp / "dl2" / "test.sh").is_file())
        asyncio.run(env.stop(delete=False))
        self.assertEqual(self.fake.calls("DELETE"), [])
        asyncio.run(env.stop(delete=True))
        self.assertEqual(len(self.fake.calls("DELETE")), 1)

    def test_compose_lifecycle(self) -> None:
        task = make_task(self.tmp / "t", "[environment]\n",
                         {"environment/docker-compose.yaml": "services:\n  main:\n    image: denv-test/busybox\n"})
        env = make_env(task, self.tmp / "trial", client=self.client)
        asyncio.run(env.start(force_build=False))
        self.assertEqual(self.fake.calls("POST", "/v1/projects")[0].body, {"name": "sandboxes", "kind": "rl-environment"})
        dep = self.fake.calls("POST", "/v1/projects/sandboxes/deploy")[0].body
        self.assertEqual(dep["env"], "harbor-hello__AbC.1__env")
        self.assertIn("denv-test/busybox", dep["compose"])
        # a second environment finds the project already there (409 is fine)
        env2 = make_env(task, self.tmp / "trial2", client=self.client)
        asyncio.run(env2.start(force_build=False))
        asyncio.run(env.stop(delete=True))
        asyncio.run(env2.stop(delete=True))

    def test_attempts_fork_the_prepared_version(self) -> None:
        dh._PREPARED.clear()
        task = make_task(self.tmp / "t", IMAGE_TOML)
        first = make_env(task, self.tmp / "trial1", client=self.client,
                       session_id="s1")
        asyncio.run(first.start(force_build=False))
        self.assertIsNone(first.forked_from)
        second = make_env(task, self.tmp / "trial2", client=self.client,
                       session_id="s2")
        asyncio.run(second.start(force_build=False))
        calls = self.fake.calls("POST", "/v1/sandboxes")
        self.assertEqual([("image" in c.body, "from_version" in c.body) for c in calls], [(True, False), (False, True)])
        self.assertEqual(calls[1].body["from_version"], second.forked_from)
        self.assertTrue(second.forked_from)
        self.assertNotEqual(first.env_id, second.env_id)
        # another task (other content) deploys its own
        other = make_env(make_task(self.tmp / "o", IMAGE_TOML + 'env = { X = "1" }\n'), self.tmp / "trial3",
                         client=self.client, session_id="s3")
        asyncio.run(other.start(force_build=False))
        self.assertIsNone(other.forked_from)
        # a prepared version that cannot be forked any more is deployed again
        for k in list(dh._PREPARED):
            dh._PREPARED[k] = "ver_gone"
        third = make_env(task, self.tmp / "trial4", client=self.client,
                       session_id="s4")
        asyncio.run(third.start(force_build=False))
        self.assertIsNone(third.forked_from)
        self.assertIn("image", self.fake.calls("POST", "/v1/sandboxes")[-1].body)
        for e in (first, second, other, third):
            asyncio.run(e.stop(delete=True))

    def test_force_build_and_a_retried_session(self) -> None:
        dh._PREPARED.clear()
        task = make_task(self.tmp / "t", IMAGE_TOML)
        first = make_env(task, self.tmp / "trial1", client=self.client)
        asyncio.run(first.start(force_build=False))
        # Harbor retries a trial under the same session id: the name is taken
        again = make_env(task, self.tmp / "trial2", client=self.client)
        asyncio.run(again.start(force_build=False))
        self.assertTrue(again.forked_from)
        names = [c.body.get("name") for c in self.fake.calls("POST", "/v1/sandboxes")]
        self.assertEqual(names[:2], ["harbor-hello__AbC.1__env"] * 2)
        self.assertRegex(names[2], r"^harbor-hello__AbC\.1__env-[0-9a-f]{6}$")
        forced = make_env(task, self.tmp / "trial3", client=self.client)
        asyncio.run(forced.start(force_build=True))
        self.assertIsNone(forced.forked_from)
        self.assertIn("image", self.fake.calls("POST", "/v1/sandboxes")[-1].body)
        for e in (first, again, forced):
            asyncio.run(e.stop(delete=True))

    def test_caps_deploy_compose(self) -> None:
        dh._PREPARED.clear()
        env = make_env(make_task(self.tmp / "t", IMAGE_TOML + "memory_mb = 300\n"), self.tmp / "trial",
                       client=self.client)
        asyncio.run(env.start(force_build=False))
        self.assertEqual(self.fake.calls("POST", "/v1/sandboxes"), [])
        dep = self.fake.calls("POST", "/v1/projects/sandboxes/deploy")[0].body
        self.assertEqual(yaml.safe_load(dep["compose"])["services"]["main"]["mem_limit"], "300m")
        asyncio.run(env.stop(delete=True))

    def test_preflight(self) -> None:
        old = os.environ.pop("DENV_API_KEY", None)
        try:
            with self.assertRaises(SystemExit):
                DenvEnvironment.preflight({})
            os.environ["DENV_API_KEY"] = "dak_x"
            DenvEnvironment.preflight({})
            DenvEnvironment.preflight({"storage": "ignore"})
            with self.assertRaises(SystemExit):
                DenvEnvironment.preflight({"storage": "sometimes"})
        finally:
            os.environ.pop("DENV_API_KEY", None)
            if old is not None:
                os.environ["DENV_API_KEY"] = old


@unittest.skipUnless(docker_image_present(FIXTURE_IMAGE), f"Docker with the fixture image {FIXTURE_IMAGE} is needed")
class TestHarborRunOracle(unittest.TestCase):
    """The real `harbor run` with the oracle agent, through the adapter, on the Docker-backed fake."""

    def test_oracle_reward_1(self) -> None:
        tmp = Path(tempfile.mkdtemp())
        fake = FakeDenv(backend=DockerBackend(label=f"harbor{os.getpid()}")).start()
        try:
            env = dict(os.environ, DENV_SERVER=fake.url, DENV_API_KEY=KEY, HARBOR_TELEMETRY="0",
                       LITELLM_LOCAL_MODEL_COST_MAP="True", NO_COLOR="1", HOME=str(tmp))
            r = subprocess.run(
                [str(VENV_BIN / "harbor"), "run", "-p", str(TASK), "-a", "oracle",
                 "-e", "denv.harbor:DenvEnvironment", "-y", "-o", str(tmp / "jobs"), "-n", "1", "-q"],
                capture_output=True, text=True, timeout=600, env=env, cwd=tmp)
            results = glob.glob(str(tmp / "jobs" / "*" / "*" / "result.json"))
            self.assertTrue(results, f"no trial result\nstdout:{r.stdout[-3000:]}\nstderr:{r.stderr[-3000:]}")
            doc = json.loads(Path(results[0]).read_text())
            rewards = (doc.get("verifier_result") or {}).get("rewards") or {}
            self.assertEqual(rewards.get("reward"), 1, json.dumps(doc, indent=1)[-3000:])
            trial = Path(results[0]).parent
            self.assertEqual((trial / "verifier" / "reward.txt").read_text().strip(), "1")
            self.assertIn("oracle wrote", (trial / "agent" / "oracle.txt").read_text())
            self.assertTrue(fake.calls("DELETE"), "the environment was destroyed")
            self.assertEqual(fake.backend.containers, {})
        finally:
            fake.stop()
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
