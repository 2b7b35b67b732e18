"""denv.hud.DenvRuntime without a server: the compose file a rollout deploys, and
what it refuses (needs hud 0.6: python/.venv-hud; skipped elsewhere)."""

from __future__ import annotations

import unittest

import yaml

from denv.client import Sandbox

try:
    from hud.eval.runtime.core import RuntimeConfig

    from denv.hud import DenvRuntime, _host_port

    NO_HUD = ""
except ImportError as e:  # Python 3.13 (Harbor's venv): hud 0.6 needs < 3.13
    NO_HUD = f"hud is not importable here ({e}); python/.venv-hud runs this"


@unittest.skipIf(NO_HUD, NO_HUD)
class TestCompose(unittest.TestCase):
    def test_caps_port_egress(self) -> None:
        rt = DenvRuntime("img", runtime_config={"resources": {"cpu": 2, "memory_mb": 1024}}, env_vars={"A": "b"})
        doc = yaml.safe_load(rt.compose_text(rt.runtime_config))
        self.assertEqual(doc["x-denv"], {"egress": "deny"})
        self.assertEqual(doc["services"]["main"], {"image": "img", "ports": ["8765"], "cpus": 2.0,
                                                   "mem_limit": "1024m", "environment": {"A": "b"}})
        storage = RuntimeConfig(image="img", resources={"storage_mb": 10})  # best effort, as HUD allows
        self.assertNotIn("storage", rt.compose_text(storage))

    def test_refusals(self) -> None:
        rt = DenvRuntime("img")
        for cfg, why in ((RuntimeConfig(image="img", resources={"gpu": {"count": 1}}), "gpu"),
                         (RuntimeConfig(), "requires runtime_config.image")):
            with self.assertRaisesRegex(ValueError, why):
                rt.compose_text(cfg)
        with self.assertRaisesRegex(ValueError, "egress"):
            DenvRuntime("img", egress="open")
        with self.assertRaisesRegex(RuntimeError, "no rollout"):
            rt.grade()

    def test_endpoint(self) -> None:
        s = Sandbox(id="env_1", name="n", status="running", endpoints={"main": "127.0.0.1:4000"})
        self.assertEqual(_host_port(s, 8765), ("127.0.0.1", 4000))
        with self.assertRaisesRegex(RuntimeError, "published no endpoint"):
            _host_port(Sandbox(id="env_1", name="n", status="running"), 8765)

    def test_from_version(self) -> None:
        rt = DenvRuntime.from_denv_version("ver_1")
        self.assertEqual((rt.version, rt.runtime_config), ("ver_1", None))


if __name__ == "__main__":
    unittest.main()
