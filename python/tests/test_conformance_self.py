"""The conformance suite's own logic, run against the Docker-backed FAKE API.

Not a substitute for t/e2e-frameworks.sh (which runs it against the real
denv-cp and denvd): this only proves the suite passes a backend that does what
api.md says, and reports SKIP (not pass) for what a backend does not serve.
"""

from __future__ import annotations

import os
import subprocess
import sys
import unittest
from pathlib import Path

from fakeapi import KEY, DockerBackend, FakeDenv
from test_harbor import docker_image_present

HERE = Path(__file__).resolve().parent


class TestSuiteOnFake(unittest.TestCase):
    def run_suite(self, fake: FakeDenv, *checks: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, DENV_SERVER=fake.url, DENV_API_KEY=KEY)
        return subprocess.run([sys.executable, "conformance.py", *checks], env=env, cwd=HERE,
                              capture_output=True, text=True, timeout=600)

    @unittest.skipUnless(docker_image_present("denv-test/busybox"), "Docker with denv-test/busybox is needed")
    def test_client_passes_and_verify_skips(self) -> None:
        fake = FakeDenv(backend=DockerBackend(label=f"self{os.getpid()}")).start()
        try:
            r = self.run_suite(fake, "client", "verify")
            self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-2000:])
            lines = [l for l in r.stdout.splitlines() if l.startswith(("ok", "not ok"))]
            client = [l for l in lines if " client: " in l]
            self.assertEqual(len(client), 7)
            self.assertTrue(all("# SKIP" not in l for l in client), client)
            verify = [l for l in lines if " verify: " in l]
            self.assertEqual(len(verify), 3)
            self.assertTrue(all("# SKIP no sidecar" in l for l in verify), verify)
        finally:
            fake.stop()

    def test_missing_route_is_skipped(self) -> None:
        fake = FakeDenv().start()
        try:
            fake.fail[("POST", "/v1/sandboxes")] = (404, "no route POST /v1/sandboxes")
            r = self.run_suite(fake, "client", "openenv")
            self.assertEqual(r.returncode, 0, r.stdout[-3000:])
            self.assertIn("# SKIP POST /v1/sandboxes is not served yet", r.stdout)
            self.assertNotRegex(r.stdout, r"(?m)^ok \d+ - [^#]*$", "nothing may pass")
        finally:
            fake.stop()


if __name__ == "__main__":
    unittest.main()
