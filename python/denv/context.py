"""Build contexts for compose ``build:``, packed the way ``docker build`` sends them.

The Python twin of the CLI's packer (src/cli/pack.c, src/tar/ignore.c): the
context directory, relative to the compose file's directory, becomes a tar
with ``.dockerignore`` honoured (Docker's rules, below), the Dockerfile and
the ``.dockerignore`` always in, owners and times left out, entries in name
order; so an unchanged directory packs to the same bytes, and the control
plane and the host know it by its sha256 (PUT /v1/contexts/{sha256}).

.dockerignore (moby/patternmatcher): one pattern per line, whitespace
trimmed, ``#`` lines and blank lines skipped, a leading ``!`` an exception;
a pattern is cleaned like a path and matches from the context's root;
``*`` is any run but ``/``, ``?`` one character but ``/``, ``[...]`` a class,
``\\`` escapes; ``**`` at the end is anything, elsewhere any number of whole
directories; a path is matched with its parent directories, and the last
matching pattern decides.
"""

from __future__ import annotations

import hashlib
import io
import os
import posixpath
import re
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

CONTEXT_MAX = 256 * 1024 * 1024  # the control plane's limit for one packed context
IGNORE_MAX_BYTES = 1 << 20
IGNORE_MAX_PATTERNS = 4096


class ContextError(ValueError):
    """A context that cannot be packed (missing, too large, a bad .dockerignore)."""


def _class(pat: str, i: int) -> tuple[str, int] | None:
    """The regex of the class starting at pat[i] == '[' and the index after it; None if it never closes."""
    j = i + 1
    neg = j < len(pat) and pat[j] in "!^"
    j += neg
    ranges: list[tuple[str, str]] = []
    while j < len(pat) and (pat[j] != "]" or not ranges):
        lo = pat[j]
        if lo == "\\" and j + 1 < len(pat):
            j += 1
            lo = pat[j]
        j += 1
        hi = lo
        if j + 1 < len(pat) and pat[j] == "-" and pat[j + 1] != "]":
            hi = pat[j + 1]
            if hi == "\\" and j + 2 < len(pat):
                j += 1
                hi = pat[j + 1]
            j += 2
        ranges.append((lo, hi))
    if j >= len(pat):
        return None
    body = "".join(re.escape(lo) if lo == hi else f"{re.escape(lo)}-{re.escape(hi)}"
                   for lo, hi in ranges if lo <= hi)
    if not body:
        return ("(?!)" if not neg else "[^/]"), j + 1
    # Like the C matcher: a class never matches '/'.
    return "(?!/)" + (f"[^{body}]" if neg else f"[{body}]"), j + 1


def _regex(pat: str) -> re.Pattern[str]:
    out = ["^"]
    i = 0
    while i < len(pat):
        c = pat[i]
        if c == "*" and i + 1 < len(pat) and pat[i + 1] == "*":
            i += 2
            if i < len(pat) and pat[i] == "/":
                i += 1
            out.append(".*" if i >= len(pat) else "(.*/)?")
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (cls := _class(pat, i)) is not None:
            out.append(cls[0])
            i = cls[1]
            continue
        else:
            if c == "\\" and i + 1 < len(pat):
                i += 1
                c = pat[i]
            out.append(re.escape(c))
        i += 1
    out.append("$")
    return re.compile("".join(out), re.S)


def _clean(p: str) -> str:
    rooted = p.startswith("/")
    parts: list[str] = []
    for seg in p.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not rooted:
                parts.append("..")
            continue
        parts.append(seg)
    return "/".join(parts)


@dataclass
class _Pattern:
    exception: bool
    rx: re.Pattern[str]


class DockerIgnore:
    """The patterns of one .dockerignore file."""

    def __init__(self, text: str = "") -> None:
        if len(text.encode()) > IGNORE_MAX_BYTES:
            raise ContextError(f".dockerignore: larger than {IGNORE_MAX_BYTES} bytes")
        self.patterns: list[_Pattern] = []
        for raw in text.split("\n"):
            line = raw.strip(" \t\r\f\v")
            if not line or line.startswith("#"):
                continue
            exc = line.startswith("!")
            if exc:
                line = line[1:]
            if len(self.patterns) >= IGNORE_MAX_PATTERNS:
                raise ContextError(f".dockerignore: more than {IGNORE_MAX_PATTERNS} patterns")
            self.patterns.append(_Pattern(exc, _regex(_clean(line))))
        self.has_exceptions = any(p.exception for p in self.patterns)

    def excluded(self, path: str) -> bool:
        """Whether path (relative, '/'-separated) is left out."""
        prefixes = [path[:k] for k in range(len(path)) if path[k] == "/"] + [path]
        out = False
        for p in self.patterns:
            if p.exception != out:
                continue
            if any(p.rx.match(s) for s in prefixes):
                out = not p.exception
        return out


def _entries(root: str, rel: str, ig: DockerIgnore, dockerfile: str) -> Iterator[tuple[str, os.stat_result, bool]]:
    """(path, stat, write it?) below root/rel in strcmp order, each directory before its contents."""
    with os.scandir(os.path.join(root, rel) if rel else root) as it:
        names = sorted(e.name for e in it)
    for name in names:
        path = f"{rel}/{name}" if rel else name
        st = os.lstat(os.path.join(root, path))
        is_dir = stat.S_ISDIR(st.st_mode)
        keep = path in (dockerfile, ".dockerignore") or not ig.excluded(path)
        descend = is_dir and (keep or ig.has_exceptions or dockerfile.startswith(path + "/"))
        if keep:
            yield path, st, True
        if descend:
            yield from _entries(root, path, ig, dockerfile)


def context_dir(base_dir: str | os.PathLike[str], context: str) -> Path:
    """The context directory: relative to the compose file's directory."""
    return Path(context) if os.path.isabs(context) else Path(base_dir) / context


def pack(directory: str | os.PathLike[str], dockerfile: str = "Dockerfile", service: str = "",
         limit: int = CONTEXT_MAX) -> bytes:
    """The context at directory as a tar (at most limit bytes); ContextError otherwise."""
    root = os.fspath(directory)
    who = f'service "{service}": ' if service else ""
    if not os.path.isdir(root):
        raise ContextError(f"{who}build context {root} is not a directory here")
    if not os.path.isfile(os.path.join(root, dockerfile)):
        raise ContextError(f"{who}{os.path.join(root, dockerfile)}: no such Dockerfile")
    ig_path = os.path.join(root, ".dockerignore")
    ig = DockerIgnore(Path(ig_path).read_text(errors="replace") if os.path.isfile(ig_path) else "")
    entries = list(_entries(root, "", ig, dockerfile))
    # Headers and padding, as the archive will have them: refuse before packing.
    size = 1024 + sum(512 + (-(-st.st_size // 512) * 512 if stat.S_ISREG(st.st_mode) else 0)
                      for _, st, _ in entries)
    if size > limit:
        raise ContextError(f"{who}build context {root} is {size / (1 << 20):.1f} MiB packed, over the "
                           f"{limit >> 20} MiB limit (leave files out with .dockerignore)")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, st, _ in entries:
            info = tarfile.TarInfo(path)
            info.mode = stat.S_IMODE(st.st_mode)
            info.mtime = 0
            full = os.path.join(root, path)
            if stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(full)
                tar.addfile(info)
            elif stat.S_ISREG(st.st_mode):
                info.size = st.st_size
                with open(full, "rb") as f:
                    tar.addfile(info, f)
            else:
                raise ContextError(f"{who}{full}: is a socket, FIFO or device; refusing to pack it")
    return buf.getvalue()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def build_services(compose: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{service: {context, dockerfile}} for the services of a parsed compose file that have build:."""
    out: dict[str, dict[str, str]] = {}
    services = compose.get("services") if isinstance(compose, dict) else None
    for name, svc in (services or {}).items() if isinstance(services, dict) else ():
        b = svc.get("build") if isinstance(svc, dict) else None
        if isinstance(b, str):
            out[str(name)] = {"context": b or ".", "dockerfile": "Dockerfile"}
        elif isinstance(b, dict):
            out[str(name)] = {"context": str(b.get("context") or "."),
                              "dockerfile": str(b.get("dockerfile") or "Dockerfile")}
    return out
