"""The package's version: the repository's VERSION file (python/denv/VERSION
is a link to it), the one place every part of denv reads its version from."""

from pathlib import Path

VERSION = Path(__file__).with_name("VERSION").read_text(encoding="ascii").strip()
