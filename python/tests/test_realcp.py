"""denv.Client against the real bin/denv-cp (what it serves without a host).

Starts denv-cp on a temporary store like t/cp/test_api.py does; skipped when it
is not built.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

import asyncio

from denv import AsyncClient, Client, DenvError, DenvTimeout

TOP = Path(os.environ.get("DENV_TOP") or Path(__file__).resolve().parents[2])
BIN = TOP / "bin" / "denv-cp"
KEY = "dak_python_realcp_0123456789abcdef"


@unittest.skipUnless(BIN.is_file(), "bin/denv-cp is not built")
class TestRealControlPlane(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = Path(tempfile.mkdtemp())
        env = {k: v for k, v in os.environ.items() if not k.startswith("DENV_")}
        env["DENV_BOOTSTRAP_KEY"] = KEY
        cls.log = open(cls.tmp / "cp.log", "wb")
        cls.proc = subprocess.Popen([str(BIN), "-addr", "127.0.0.1:0", "-db", str(cls.tmp / "db"), "-v"],
                                    stdout=subprocess.DEVNULL, stderr=cls.log, env=env)
        port = None
        deadline = time.time() + 10
        while time.time() < deadline and port is None and cls.proc.poll() is None:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", (cls.tmp / "cp.log").read_text(errors="replace"))
            port = m.group(1) if m else None
            time.sleep(0.05)
        if port is None:
            cls.tearDownClass()
            raise RuntimeError("denv-cp did not start")
        cls.url = f"http://127.0.0.1:{port}"

    @classmethod
    def tearDownClass(cls) -> None:
        cls.proc.send_signal(signal.SIGTERM)
        try:
            cls.proc.wait(15)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
            cls.proc.wait()
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_project_env_and_current_version(self) -> None:
        c = Client(self.url, KEY, timeout=10)
        c.ensure_project("py-real")
        c.ensure_project("py-real")  # 409 is fine
        envs = c._json("GET", "/v1/projects/py-real/envs")["environments"]
        alpha = [e for e in envs if e["Name"] == "alpha"][0]
        self.assertEqual(c.current_version(alpha["ID"]), "")
        self.assertEqual(c.environment(alpha["ID"])["ID"], alpha["ID"])

    def test_error_format(self) -> None:
        c = Client(self.url, KEY, timeout=10)
        with self.assertRaises(DenvError) as cm:
            c.current_version("env_does_not_exist")
        self.assertRegex(str(cm.exception), r"^denv GET /v1/envs/env_does_not_exist: 404 \S")
        bad = Client(self.url, "dak_wrong_key_000000000000", timeout=10)
        with self.assertRaises(DenvError) as cm:
            bad.current_version("env_x")
        self.assertEqual(cm.exception.status, 401)
        self.assertTrue(str(cm.exception).startswith("denv GET /v1/envs/env_x: 401 "))

    def test_deploy_without_host_does_not_finish(self) -> None:
        c = Client(self.url, KEY, timeout=10)
        c.poll_interval = 0.05
        c.ensure_project("py-deploy")
        compose = "services:\n  main:\n    image: denv-test/busybox\n    command: [sleep, infinity]\n"
        with self.assertRaises(DenvError) as cm:
            c.deploy("py-deploy", compose, timeout_sec=1)
        # no host: either still pending when the wait ends, or failed with the reason
        e = cm.exception
        self.assertTrue(isinstance(e, DenvTimeout) or e.status in ("failed", "rolled_back"), str(e))
        with self.assertRaises(DenvError) as cm:
            c.deploy("py-deploy", "services: [", timeout_sec=1)
        self.assertEqual(cm.exception.status, 400)

    def test_deploy_idempotency_key(self) -> None:
        c = Client(self.url, KEY, timeout=10)
        c.poll_interval = 0.05
        c.ensure_project("py-idem")
        compose = "services:\n  main:\n    image: denv-test/busybox\n    command: [sleep, infinity]\n"
        for _ in range(2):  # no host: each wait ends unfinished; the retry must not deploy again
            with self.assertRaises(DenvError):
                c.deploy("py-idem", compose, timeout_sec=1, idempotency_key="py-idem-1")
        env = c._json("GET", "/v1/projects/py-idem/envs")["environments"][0]["ID"]
        deps = c._json("GET", f"/v1/envs/{env}/deployments")["deployments"]
        self.assertEqual(len(deps), 1, deps)
        with self.assertRaises(DenvError) as cm:
            c.deploy("py-idem", compose + "# another\n", timeout_sec=1, idempotency_key="py-idem-1")
        self.assertEqual(cm.exception.status, 422)


    def test_batch_without_host_fails_per_member(self) -> None:
        c = Client(self.url, KEY, timeout=10)
        c.poll_interval = 0.05
        b = c.batch(3, image="denv-test/busybox", name_prefix="py-b-", wait=False)
        self.assertEqual([(m.name, m.state) for m in b.members], [(f"py-b-{i}", "pending") for i in range(3)])
        self.assertTrue(b.id.startswith("bat_"))
        try:
            b = c.wait_batch(b.id, timeout_sec=20)
        except DenvTimeout:
            self.fail("members without a host should fail at place/provision, not stay pending")
        self.assertEqual(len(b.failed), 3, b)
        self.assertTrue(all("no connected host" in m.error for m in b.failed), b.failed)
        with self.assertRaises(DenvError) as cm:
            c.batch(300, image="denv-test/busybox")
        self.assertEqual((cm.exception.status, cm.exception.message), (400, "count must be 1 to 256"))

    def test_async_client_against_the_real_server(self) -> None:
        async def main() -> None:
            async with AsyncClient(self.url, KEY, timeout=10) as ac:
                ac.poll_interval = 0.05
                await asyncio.gather(*(ac.ensure_project(f"py-async-{i}") for i in range(4)))
                envs = await ac._json("GET", "/v1/projects/py-async-0/envs")
                alpha = envs["environments"][0]["ID"]
                self.assertEqual(await ac.current_version(alpha), "")
                with self.assertRaises(DenvError) as cm:
                    await ac.environment("env_does_not_exist")
                self.assertEqual(cm.exception.status, 404)
                b = await ac.batch(2, image="denv-test/busybox", name_prefix="py-ab-", wait=False)
                self.assertEqual((await ac.batch_status(b.id)).id, b.id)
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
