"""denv import karotte: t/fixtures/karotte/min-env read by Karotte's own loader, into compose."""

from __future__ import annotations

import os
import shutil
import tempfile
import unittest
from pathlib import Path
from unittest import mock

import yaml

from denv import interop, karotte

FIXTURE = Path(__file__).resolve().parent.parent.parent / "t" / "fixtures" / "karotte" / "min-env"
try:
    import karotte as _karotte_pkg  # noqa: F401

    NO_KAROTTE = ""
except ImportError:
    NO_KAROTTE = "karotte is not installed (t/requirements-nodeps.txt)"


class TestImportKarotte(unittest.TestCase):
    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp())

    def tearDown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    @unittest.skipIf(NO_KAROTTE, NO_KAROTTE)
    def test_fixture(self) -> None:
        doc = karotte.import_karotte(FIXTURE, self.tmp / "p")
        svc = doc["services"]["karotte"]
        self.assertEqual((svc["user"], svc["mem_limit"], svc["pids_limit"]), ("1000:1000", "4g", 1024))
        self.assertEqual(svc["build"], {"context": "environment", "dockerfile": "Containerfile"})
        self.assertEqual(svc["volumes"], ["student:/workdir"])
        xd = doc["x-denv"]
        self.assertEqual((xd["egress"], xd["agent"]), ("deny", {"service": "karotte"}))
        v = xd["verifier"]
        self.assertEqual(v["collect"], ["/workdir/data/answer.txt"])
        # the judge's argv: python3 for the loader's interpreter, the submitted
        # path's copy, the output file under /logs/verifier
        self.assertEqual(v["command"][4:], ["python3", "-m", "environment.judges.sum_answer",
                                            "/submission/workdir/data/answer.txt", karotte.SCORE_FILE])
        written = yaml.safe_load((self.tmp / "p" / "docker-compose.yaml").read_text())
        self.assertEqual(written, doc)
        self.assertIn("numbers.txt", (self.tmp / "p" / "tasks" / "fix-backup" / "instruction.md").read_text())
        self.assertTrue((self.tmp / "p" / "environment" / "Containerfile").is_file())

    def test_refusals(self) -> None:
        with self.assertRaisesRegex(interop.InteropError, "no Containerfile"):
            karotte.import_karotte(self.tmp, self.tmp / "o")
        (self.tmp / "env").mkdir()
        (self.tmp / "env" / "Containerfile").write_text("FROM x\n")
        with self.assertRaisesRegex(interop.InteropError, "not a Karotte environment"):
            karotte.import_karotte(self.tmp / "env", self.tmp / "o")
        with mock.patch.dict(os.environ, {"DENV_KAROTTE_PYTHON": "/usr/bin/python3"}):
            with self.assertRaisesRegex(interop.InteropError, "No module named 'karotte'.*DENV_KAROTTE_PYTHON"):
                karotte.load_tasks(FIXTURE)

    def test_judge_paths(self) -> None:
        self.assertEqual(karotte._in_submission("/a/b/c", ["/a/b"]), "/submission/a/b/c")
        self.assertEqual(karotte._in_submission("/a/bc", ["/a/b"]), "/a/bc")
        doc = {"python": "/py", "tasks": [{"id": "t", "steps": [
            {"name": "S", "submission_paths": [], "judge": {"type": "RegexJudge"}}]}]}
        self.assertEqual(karotte.verifier_of(doc), (None, ""))  # a transcript judge grades no file


if __name__ == "__main__":
    unittest.main()
