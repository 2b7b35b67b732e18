"""Run unittest modules and print TAP (one line per test; skips as # SKIP)."""

from __future__ import annotations

import sys
import traceback
import unittest
from typing import Any


class TapResult(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def _line(self, ok: bool, test: unittest.TestCase, extra: str = "") -> None:
        self.n += 1
        name = test.id().split(".", 1)[-1]
        print(f"{'ok' if ok else 'not ok'} {self.n} - {name}{extra}", flush=True)

    def addSuccess(self, test: unittest.TestCase) -> None:
        super().addSuccess(test)
        self._line(True, test)

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        super().addSkip(test, reason)
        self._line(True, test, f" # SKIP {reason}")

    def _fail(self, test: unittest.TestCase, err: Any) -> None:
        self._line(False, test)
        for line in "".join(traceback.format_exception(*err)).splitlines()[-25:]:
            print(f"#   {line}", flush=True)

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:
        super().addFailure(test, err)
        self._fail(test, err)

    def addError(self, test: unittest.TestCase, err: Any) -> None:
        super().addError(test, err)
        self._fail(test, err)

    def addExpectedFailure(self, test: unittest.TestCase, err: Any) -> None:
        super().addExpectedFailure(test, err)
        self._line(True, test, " # TODO expected failure")

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        super().addUnexpectedSuccess(test)
        self._line(False, test, " # unexpected success")


def run(modules: list[str]) -> int:
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for name in modules:
        suite.addTests(loader.loadTestsFromName(name))
    print(f"1..{suite.countTestCases()}", flush=True)
    result = TapResult()
    suite.run(result)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
