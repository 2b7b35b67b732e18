"""denv.interop: Harbor tasks in (import) and versions out (export), without a server."""

from __future__ import annotations

import base64
import io
import os
import shutil
import tarfile
import tempfile
import unittest
from pathlib import Path
from typing import Any

import yaml

from harbor.models.task.config import TaskConfig

from denv import interop

FIXTURES = Path(__file__).resolve().parent.parent.parent / "t" / "fixtures" / "harbor"


def tests_of(verifier: dict[str, Any]) -> dict[str, bytes]:
    """The files the verifier command carries, by name."""
    words = verifier["command"][4:]
    raw = base64.b64decode("".join(words))
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}  # type: ignore[union-attr]


class TestImportHarbor(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp())

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def imp(self, task: str) -> dict[str, Any]:
        interop.import_harbor(FIXTURES / task, self.tmp / task)
        return yaml.safe_load((self.tmp / task / "docker-compose.yaml").read_text())

    def test_image_task(self) -> None:
        doc = self.imp("docker-image")
        main = doc["services"]["main"]
        self.assertEqual(main["user"], "1000:1000")
        self.assertEqual((main["cpus"], main["mem_limit"]), (1.0, "512m"))
        self.assertEqual(main["volumes"], ["work:/app"])
        self.assertEqual(main["build"], {"context": "environment", "dockerfile": "Dockerfile.denv"})
        df = (self.tmp / "docker-image" / "environment" / "Dockerfile.denv").read_text()
        self.assertIn("FROM denv-test/debian:latest", df)
        self.assertIn("COPY . /app/", df)  # Harbor uploads an image task's environment/ to the workdir
        self.assertIn("chown -R 1000:1000 /app", df)
        xd = doc["x-denv"]
        self.assertEqual((xd["egress"], xd["agent"], xd["verifier"]["service"]), ("deny", {"service": "main"}, "main"))
        self.assertEqual(xd["verifier"]["timeout_sec"], 120)
        self.assertEqual(tests_of(xd["verifier"])["test.sh"], (FIXTURES / "docker-image/tests/test.sh").read_bytes())
        self.assertIn("cd /app", xd["verifier"]["command"][2])
        for part in ("instruction.md", "task.toml", "solution/solve.sh", "tests/test.sh"):
            self.assertTrue((self.tmp / "docker-image" / "tasks" / "docker-image" / part).is_file(), part)

    def test_dockerfile_task(self) -> None:
        doc = self.imp("shared-dockerfile")
        df = (self.tmp / "shared-dockerfile" / "environment" / "Dockerfile.denv").read_text()
        self.assertTrue(df.startswith("FROM denv-test/debian:latest"))
        self.assertNotIn("COPY . /app/", df)  # a Dockerfile task's image is the Dockerfile's alone
        self.assertIn("WORKDIR /app", df)
        self.assertEqual(doc["services"]["main"]["volumes"], ["work:/app"])
        self.assertNotIn("solution", [p.name for p in (self.tmp / "shared-dockerfile" / "environment").iterdir()])

    def test_compose_task(self) -> None:
        doc = self.imp("compose-two")
        self.assertEqual(sorted(doc["services"]), ["db", "main"])
        self.assertEqual(doc["services"]["main"]["build"],
                         {"context": "environment", "dockerfile": "Dockerfile.denv"})
        self.assertEqual(doc["services"]["main"]["user"], "1000:1000")
        self.assertNotIn("user", doc["services"]["db"])
        self.assertFalse((self.tmp / "compose-two" / "environment" / "docker-compose.yaml").exists())

    def test_refusals(self) -> None:
        with self.assertRaisesRegex(interop.InteropError, "GPU"):
            interop.import_harbor(FIXTURES / "gpu-refused", self.tmp / "g")
        with self.assertRaisesRegex(interop.InteropError, "not a Harbor task"):
            interop.import_harbor(self.tmp, self.tmp / "x")
        (self.tmp / "full").mkdir()
        (self.tmp / "full" / "f").write_text("x")
        with self.assertRaisesRegex(interop.InteropError, "not empty"):
            interop.import_harbor(FIXTURES / "docker-image", self.tmp / "full")

    def test_tests_too_large(self) -> None:
        task = self.tmp / "big"
        shutil.copytree(FIXTURES / "docker-image", task)
        (task / "tests" / "blob").write_bytes(os.urandom(interop.TESTS_MAX + 1))  # does not compress
        with self.assertRaisesRegex(interop.InteropError, "at most"):
            interop.import_harbor(task, self.tmp / "out")


class FakeClient:
    """What export asks of a Client: GET of a project's envs and an env's versions."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec

    def _json(self, method: str, path: str) -> dict[str, Any]:
        if path == "/v1/projects/p/envs":
            return {"environments": [{"ID": "env_1", "Name": "alpha", "CurrentVersionID": "ver_2"}]}
        if path == "/v1/envs/env_1":
            return {"environment": {"ID": "env_1", "Name": "alpha", "CurrentVersionID": "ver_2"}}
        if path == "/v1/envs/env_1/versions":
            return {"versions": [{"ID": "ver_1", "Spec": {}}, {"ID": "ver_2", "Spec": self.spec}]}
        raise AssertionError(path)


SPEC = {"egress": "deny", "agent": {"service": "main"},
        "verifier": {"service": "main", "image": "", "command": ["sh", "-c", "echo 1"],
                     "collect": ["/app/answer.txt"], "timeout_sec": 90},
        "services": [{"name": "main", "image": "sha256:abc", "user": "1000:1000",
                      "env": {"A": "b"}, "volumes": ["work:/app"],
                      "resources": {"memory_mb": 512, "cpus": 1.5}}],
        "volumes": ["work"]}


class TestExportHarbor(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp())
        interop.import_harbor(FIXTURES / "docker-image", self.tmp / "proj")

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_one_service(self) -> None:
        out = interop.export_harbor(FakeClient(SPEC), "p", self.tmp / "dist", self.tmp / "proj")
        self.assertEqual(out, [self.tmp / "dist" / "docker-image"])
        d = out[0]
        cfg = TaskConfig.model_validate_toml((d / "task.toml").read_text())  # Harbor's own reader
        self.assertEqual(cfg.environment.docker_image, "sha256:abc")
        self.assertEqual((cfg.environment.cpus, cfg.environment.memory_mb), (1.5, 512))
        self.assertEqual(cfg.environment.env, {"A": "b"})
        self.assertEqual(cfg.verifier.timeout_sec, 90.0)
        self.assertEqual(cfg.metadata["denv_version"], "p@ver_2")
        self.assertIsNone(cfg.agent.user)
        self.assertEqual(getattr(cfg.environment.network_mode, "value", None), "no-network")
        test = (d / "tests" / "test.sh").read_text()
        self.assertIn("for p in /app/answer.txt; do", test)
        self.assertIn("sh -c 'echo 1' > /logs/verifier/grader.out", test)
        self.assertTrue((d / "solution" / "solve.sh").is_file())
        self.assertEqual(list((d / "environment").iterdir()), [])  # nothing for Harbor to upload over /app

    def test_version_named(self) -> None:
        with self.assertRaisesRegex(interop.InteropError, "no such version"):
            interop.export_harbor(FakeClient(SPEC), "p@ver_9", self.tmp / "dist", self.tmp / "proj")
        out = interop.export_harbor(FakeClient(dict(SPEC, egress="allow")), "p@ver_2", self.tmp / "d2",
                                    self.tmp / "proj")
        self.assertIn('network_mode = "public"', (out[0] / "task.toml").read_text())

    def test_env_refs(self) -> None:
        out = interop.export_harbor(FakeClient(SPEC), "env_1", self.tmp / "d3", self.tmp / "proj")
        self.assertIn('denv_version = "env_1@ver_2"', (out[0] / "task.toml").read_text())
        with self.assertRaisesRegex(interop.InteropError, "declares no x-denv.agent"):
            interop.export_harbor(FakeClient(SPEC), "env_1@ver_1", self.tmp / "d4", self.tmp / "proj")

    def test_multi_service(self) -> None:
        spec = dict(SPEC, services=SPEC["services"] + [{"name": "db", "image": "redis", "volumes": ["d:/data"]}])
        d = interop.export_harbor(FakeClient(spec), "p", self.tmp / "dist", self.tmp / "proj")[0]
        compose = yaml.safe_load((d / "environment" / "docker-compose.yaml").read_text())
        self.assertEqual(compose["services"]["main"]["image"], "sha256:abc")
        self.assertEqual(compose["services"]["main"]["mem_limit"], "512m")
        self.assertNotIn("docker_image", (d / "task.toml").read_text())

    def test_refusals(self) -> None:
        for spec, why in ((dict(SPEC, verifier={}), "no x-denv.agent"),
                          (dict(SPEC, verifier=dict(SPEC["verifier"], image="g", service="")), "image of its own")):
            with self.assertRaisesRegex(interop.InteropError, why):
                interop.export_harbor(FakeClient(spec), "p", self.tmp / "dist", self.tmp / "proj")
        with self.assertRaisesRegex(interop.InteropError, "no tasks"):
            interop.export_harbor(FakeClient(SPEC), "p", self.tmp / "dist", self.tmp)

    def test_openenv(self) -> None:
        out = interop.export_openenv(FakeClient(SPEC), "p", self.tmp / "oe")
        self.assertIn("FROM sha256:abc", (out / "Dockerfile").read_text())
        app = (out / "server" / "app.py").read_text()
        compile(app, "app.py", "exec")
        self.assertIn("VERSION = 'ver_2'", app)
        self.assertEqual(yaml.safe_load((out / "openenv.yaml").read_text())["app"], "server.app:app")


if __name__ == "__main__":
    unittest.main()
