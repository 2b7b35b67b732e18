"""denv.context: .dockerignore with Docker's rules (the C matcher's table,
t/unit/tar-ignore.c, so both languages agree) and the packing of a context."""

from __future__ import annotations

import io
import os
import tarfile
import tempfile
import unittest
from pathlib import Path

from denv import context
from denv.context import ContextError, DockerIgnore

# (the .dockerignore text, a path, whether it is left out) as in t/unit/tar-ignore.c
CASES = [
    ("*.md\n", "README.md", True),
    ("*.md\n", "docs/x.md", False),
    ("**/*.md\n", "docs/x.md", True),
    ("**/*.md\n", "README.md", True),
    ("docs/**\n", "docs/a/b.txt", True),
    ("docs/**\n", "docsx/a", False),
    ("a/**/b\n", "a/b", True),
    ("a/**/b\n", "a/x/y/b", True),
    ("a/**/b\n", "a/xb", False),
    ("node_modules\n", "node_modules/x/y.js", True),
    ("secret.txt\n", "sub/secret.txt", False),
    ("*\n!keep.txt\n", "keep.txt", False),
    ("*\n!keep.txt\n", "other.txt", True),
    ("!keep.txt\n*\n", "keep.txt", True),
    ("dir\n!dir/keep\n", "dir/keep", False),
    ("dir\n!dir/keep\n", "dir/other", True),
    ("?.txt\n", "a.txt", True),
    ("?.txt\n", "ab.txt", False),
    ("a?b\n", "a/b", False),
    ("a*b\n", "a/b", False),
    ("[abc].txt\n", "b.txt", True),
    ("[!abc].txt\n", "b.txt", False),
    ("[a-c]x\n", "cx", True),
    ("\\*.txt\n", "*.txt", True),
    ("\\*.txt\n", "a.txt", False),
    ("./build/\n", "build/out", True),
    ("/tmp\n", "tmp", True),
    ("a/../b\n", "b", True),
    ("# comment\n\n   \n", "# comment", False),
    ("  spaced.txt  \r\n", "spaced.txt", True),
    ("", "anything", False),
    ("**\n", "x/y/z", True),
    ("[\n", "[", True),
]


def names(tar_bytes: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as t:
        return t.getnames()


class TestDockerIgnore(unittest.TestCase):
    def test_cases(self) -> None:
        for text, path, out in CASES:
            with self.subTest(pattern=text, path=path):
                self.assertEqual(DockerIgnore(text).excluded(path), out)

    def test_too_many_patterns(self) -> None:
        with self.assertRaisesRegex(ContextError, "more than 4096 patterns"):
            DockerIgnore("a\n" * 4097)


class TestPack(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp())
        (self.dir / "logs").mkdir()
        (self.dir / "Dockerfile").write_text("FROM x\n")
        (self.dir / "app.txt").write_text("app")
        (self.dir / "secret").write_text("s")
        (self.dir / "logs" / "keep.log").write_text("k")
        (self.dir / "logs" / "drop.log").write_text("d")
        (self.dir / ".dockerignore").write_text("secret\nlogs\n!logs/keep.log\nDockerfile\n.dockerignore\n")

    def tearDown(self) -> None:
        for p in sorted(self.dir.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() else p.unlink()
        self.dir.rmdir()

    def test_what_goes_in(self) -> None:
        got = names(context.pack(self.dir))
        # The Dockerfile and .dockerignore stay in even when they are ignored.
        self.assertEqual(got, [".dockerignore", "Dockerfile", "app.txt", "logs/keep.log"])

    def test_same_tree_same_bytes(self) -> None:
        a = context.pack(self.dir)
        os.utime(self.dir / "app.txt", (1, 1))
        self.assertEqual(context.digest(a), context.digest(context.pack(self.dir)))

    def test_over_the_limit(self) -> None:
        with self.assertRaisesRegex(ContextError, r'service "app": build context .* is 0\.0 MiB packed, '
                                    r"over the 0 MiB limit"):
            context.pack(self.dir, service="app", limit=1000)

    def test_no_dockerfile(self) -> None:
        with self.assertRaisesRegex(ContextError, "no such Dockerfile"):
            context.pack(self.dir, "Containerfile", service="app")

    def test_build_services(self) -> None:
        doc = {"services": {"a": {"build": "./x"}, "b": {"build": {"context": "y", "dockerfile": "D"}},
                            "c": {"image": "i"}}}
        self.assertEqual(context.build_services(doc), {"a": {"context": "./x", "dockerfile": "Dockerfile"},
                                                       "b": {"context": "y", "dockerfile": "D"}})


if __name__ == "__main__":
    unittest.main()
