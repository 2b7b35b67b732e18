"""python/pyproject.toml: each extra installs on every Python the package claims.

Harbor needs a newer Python than denv does, so its requirement carries an
environment marker; the check reads the installed frameworks' own
Requires-Python, so a framework that raises its floor fails it.
"""

from __future__ import annotations

import tomllib
import unittest
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
# Minor versions to try against requires-python (those it admits are "claimed").
CANDIDATES = [f"3.{m}" for m in range(8, 20)]


def project() -> dict:
    return tomllib.loads(PYPROJECT.read_text())["project"]


def claimed() -> list[str]:
    spec = SpecifierSet(project()["requires-python"])
    return [v for v in CANDIDATES if spec.contains(v + ".0")]


def applies(req: Requirement, py: str) -> bool:
    return req.marker is None or req.marker.evaluate({"python_version": py, "python_full_version": py + ".0"})


class TestExtras(unittest.TestCase):
    def test_claims_3_11_and_later(self) -> None:
        self.assertEqual(claimed()[0], "3.11")

    def test_every_requirement_installs_where_it_applies(self) -> None:
        extras = project()["optional-dependencies"]
        self.assertTrue({"harbor", "inspect", "openenv", "all"} <= set(extras))
        for extra, reqs in extras.items():
            for text in reqs:
                req = Requirement(text)
                try:
                    floor = metadata.metadata(req.name).get("Requires-Python") or ""
                except metadata.PackageNotFoundError:
                    self.skipTest(f"{req.name} is not installed here")
                spec = SpecifierSet(floor)
                for py in claimed():
                    self.assertEqual(
                        applies(req, py), spec.contains(py + ".0"),
                        f"denv[{extra}] {text!r} on Python {py}: {req.name} requires Python {floor or 'any'}")

    def test_harbor_marker(self) -> None:
        extras = project()["optional-dependencies"]
        for extra in ("harbor", "all"):
            (req,) = [Requirement(r) for r in extras[extra] if Requirement(r).name == "harbor"]
            self.assertFalse(applies(req, "3.11"), extra)
            self.assertTrue(applies(req, "3.12") and applies(req, "3.13"), extra)

    def test_all_is_every_extra(self) -> None:
        extras = project()["optional-dependencies"]
        # verifiers pins mcp==2.0.0 where harbor needs mcp>=2.3: no install holds
        # both, so denv[verifiers] stands alone (pyproject.toml says so); karotte
        # pins fastmcp<4 where harbor needs >=4.1.6: denv[karotte] too; hud pins
        # fastmcp==3.4.10 and mcp<2: denv[hud] too.
        union = {r for k, v in extras.items() if k not in ("all", "verifiers", "karotte", "hud") for r in v}
        self.assertEqual(set(extras["all"]), union)


if __name__ == "__main__":
    unittest.main()
