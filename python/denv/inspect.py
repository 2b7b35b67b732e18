"""Inspect sandbox ``denv``: one denv environment per sample.

Select it with ``sandbox="denv"`` (image from ``DENV_SANDBOX_IMAGE``),
``("denv", "denv.yaml")``, ``("denv", "compose.yaml")`` (a compose file,
``build:`` included, deployed per sample as Inspect's Docker sandbox does),
``("denv", DenvSandboxConfig(...))`` or ``("denv", "ver_…")``. Inspect finds it through the ``inspect_ai`` entry point
(``denv._inspect_registry``), so a task file need not import this module.

Limits (python/README.md has the whole story): denvd keeps 1 MiB of each of a
command's stdout and stderr, less than the 10 MiB Inspect allows, so a cut
output raises ``OutputLimitExceededError`` (limit "1 MiB") carrying what was
received, rather than passing for the whole output. Files move as tar archives
of at most 32 MiB, a larger file in parts (``Client.put_bytes``/``get_parts``);
a command over 64 KiB goes up as a script file. Docker moves files as root, so
for an exec user that is not root ``read_file``/``write_file`` first ask, as
that user, whether it may. A cancelled exec is killed in the container.
"""

from __future__ import annotations

import errno
import functools
import io
import logging
import os
import posixpath
import shlex
import stat
import tarfile
import uuid
from pathlib import Path
from typing import Any, Literal, Union, overload

import anyio
import yaml
from pydantic import BaseModel, ConfigDict, model_validator

from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    sandboxenv,
)

from denv.client import Client, DenvError, Sandbox, shell_body, shell_command

logger = logging.getLogger(__name__)

DEFAULT_IMAGE = "python:3.12-slim"
# Image sandboxes are made in this project, so that ``inspect sandbox cleanup
# denv`` knows which environments are Inspect's.
PROJECT = "inspect"
DEFAULT_EXEC_TIMEOUT = 300
# exec's input: one file per call, this prefix and 32 random hex digits.
STDIN_PREFIX = "/tmp/.denv_stdin."
# A command whose script is longer than this goes up as a file the shell reads
# (the API takes a JSON body of at most 1 MiB; the kernel one argv string of
# at most 128 KiB).
SCRIPT_INLINE_MAX = 64 * 1024
SCRIPT_PREFIX = "/tmp/.denv_cmd."
# Every command runs with DENV_INSPECT_EXEC=<random> in its environment, which
# its children inherit: a cancelled exec is killed by that mark (KILL_MARKED),
# as the API has no route to cancel a running command.
EXEC_MARK = "DENV_INSPECT_EXEC"
MARK_EXEC = 'export DENV_INSPECT_EXEC="$1"; shift; exec "$@"'
KILL_MARKED = (
    'for d in /proc/[0-9]*; do '
    'if grep -q "DENV_INSPECT_EXEC=$1" "$d/environ" 2>/dev/null; then kill -9 "${d#/proc/}" 2>/dev/null; fi; '
    'done; exit 0'
)
# How long the kill of a cancelled command may take before we stop waiting.
CANCEL_KILL_TIMEOUT = 5
# denvd keeps 1 MiB of each of stdout and stderr (EXEC_OUTPUT_MAX); a file
# moves as a tar archive of at most 32 MiB (MAX_ARCHIVE).
DENV_EXEC_LIMIT_STR = "1 MiB"
DENV_ARCHIVE_LIMIT_STR = "32 MiB"
# denv.yaml first; then the names Inspect's Docker sandbox looks for.
CONFIG_FILES = ["denv.yaml", "denv.yml", "compose.yaml", "compose.yml", "docker-compose.yaml",
                "docker-compose.yml"]


class DenvSandboxConfig(BaseModel):
    """What ``denv.yaml`` holds: an image, a version or a compose file, and where exec runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: str | None = None
    from_version: str | None = None
    # A compose file (absolute, or relative to the denv.yaml naming it): each
    # sample deploys it, its build: contexts packed relative to the file.
    compose: str | None = None
    egress: Literal["deny", "allow"] = "deny"
    service: str = "main"
    volumes: list[str] = ["/work"]
    # exec's user and directory when a call names none, as compose's user: and
    # working_dir: are for Inspect's Docker sandbox; None: the image's own.
    user: str | None = None
    workdir: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "DenvSandboxConfig":
        if sum(bool(x) for x in (self.image, self.from_version, self.compose)) != 1:
            raise ValueError("denv: a sandbox config needs exactly one of image, from_version or compose")
        return self


def resolve_config(config: SandboxEnvironmentConfigType | None) -> DenvSandboxConfig:
    """The ``DenvSandboxConfig`` for whatever Inspect passed as the sandbox config."""
    if config is None:
        return DenvSandboxConfig(image=os.environ.get("DENV_SANDBOX_IMAGE") or DEFAULT_IMAGE)
    if isinstance(config, DenvSandboxConfig):
        return config
    if isinstance(config, BaseModel):
        return DenvSandboxConfig(**config.model_dump())
    if isinstance(config, str):
        if os.path.isfile(config):
            with open(config, encoding="utf-8") as f:
                doc = yaml.safe_load(f) or {}
            if not isinstance(doc, dict):
                raise ValueError(f"denv: {config} must hold a mapping of sandbox settings")
            if "services" in doc:  # a compose file itself
                return DenvSandboxConfig(compose=os.path.abspath(config))
            if doc.get("compose"):
                doc["compose"] = os.path.join(os.path.dirname(os.path.abspath(config)), str(doc["compose"]))
            return DenvSandboxConfig(**doc)
        if config.startswith("ver_"):
            return DenvSandboxConfig(from_version=config)
        raise ValueError(
            f"denv: sandbox config {config!r} is not a file and not a version id (ver_…). "
            "Inspect reads a string config as a file path: put the image in denv.yaml "
            "or pass DenvSandboxConfig(image=...)."
        )
    raise ValueError(f"denv: unsupported sandbox config {config!r}")


def compose_service(path: str, wanted: str) -> str:
    """The service of the compose file at ``path`` that exec runs in: ``wanted``
    when the file has it, else as Inspect's Docker sandbox picks its default:
    the service marked ``x-default: true``, else one named ``default``, else
    the first."""
    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f) or {}
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict) or not services:
        raise ValueError(f"denv: {path} has no services")
    if wanted in services:
        return wanted
    for name, svc in services.items():
        if isinstance(svc, dict) and svc.get("x-default") is True:
            return str(name)
    return "default" if "default" in services else str(next(iter(services)))


def _record(sbx: Sandbox, cfg: DenvSandboxConfig, service: str) -> None:
    """Put the environment's id and version in the sample's transcript (an info event
    from source ``denv``), so the eval log says which environment ran the sample."""
    from inspect_ai.log import transcript

    env = sbx.raw or {}
    transcript().info({
        "denv_env_id": sbx.id,
        "denv_env_name": sbx.name,
        "denv_version": str(env.get("CurrentVersionID") or "") or None,
        "from_version": cfg.from_version,
        "image": cfg.image,
        "compose": cfg.compose,
        "service": service,
    }, source="denv")


def _is_timeout(e: BaseException) -> bool:
    return isinstance(e, TimeoutError)


def _utf8_cut(text: str, limit: int) -> str:
    """The longest prefix of ``text`` that is at most ``limit`` bytes of UTF-8."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


def _exec_denied(stderr: str, program: str) -> bool:
    """The shell's one-line report that it may not run ``program`` (exit 126)."""
    lines = stderr.strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith(("sh: ", "bash: ")):
        return False
    return lines[0].lower().endswith(f"{program}: permission denied".lower())


def with_stdin(path: str, argv: list[str]) -> list[str]:
    """``argv`` with its stdin opened from ``path``, which is removed at once.

    The shell opens the file as the service's user before ``argv`` starts (a
    ``su`` in ``argv`` inherits the open descriptor), then unlinks it: the input
    exists as a file only from the upload until the command starts.
    """
    return ["sh", "-c", 'exec <"$1" || exit 126\nrm -f -- "$1"\nshift\nexec "$@"', "sh", path, *argv]


def _is_dir_alias(file: str) -> bool:
    return posixpath.basename(file.rstrip("/")) in (".", "..") or file.endswith("/")


class _Who:
    """The service's own user (the one exec runs as) and its working directory."""

    def __init__(self, uid: int, gid: int, workdir: str) -> None:
        self.uid = uid
        self.gid = gid
        self.workdir = workdir


# What the file probes print: how the service's user sees a path.
READ_PROBE = (
    'if [ -d "$1" ]; then echo dir; '
    'elif [ -e "$1" ]; then if [ -r "$1" ]; then echo ok; else echo denied; fi; '
    "else echo missing; fi"
)
WRITE_PROBE = (
    'd=$(dirname -- "$1"); '
    'if [ -d "$1" ]; then echo dir; '
    'elif [ -e "$1" ]; then if [ -w "$1" ]; then echo ok; else echo denied; fi; '
    'elif mkdir -p -- "$d" 2>/dev/null && [ -w "$d" ] && [ -x "$d" ]; then echo ok; '
    "else echo denied; fi"
)


# What _get_large asks: "dir", or "file SIZE MODE" (octal permission bits).
LARGE_PROBE = 'if [ -d "$1" ]; then echo dir; else echo "file $(wc -c <"$1") $(stat -c %a "$1")"; fi'


@sandboxenv(name="denv")
class DenvSandbox(SandboxEnvironment):
    """One denv environment; ``exec`` runs in its ``service``."""

    def __init__(self, client: Client, env_id: str, service: str, sandbox: Sandbox | None = None,
                 user: str | None = None, workdir: str | None = None) -> None:
        super().__init__()
        self._client = client
        self._env_id = env_id
        self._service = service
        self._sandbox = sandbox
        self._user = None if user in (None, "", "root", "0") else user
        self._workdir = workdir
        self._whoami: _Who | None = None

    # ---- lifecycle ----

    @classmethod
    def config_files(cls) -> list[str]:
        return list(CONFIG_FILES)

    @classmethod
    def default_concurrency(cls) -> int | None:
        return 8

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return DenvSandboxConfig(**config)

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        resolve_config(config)
        Client()  # a missing DENV_API_KEY fails here, before any model call

    @classmethod
    async def sample_init(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        metadata: dict[str, str],
    ) -> dict[str, SandboxEnvironment]:
        cfg = resolve_config(config)
        client = Client()
        service = cfg.service
        if cfg.compose:
            compose = cfg.compose
            service = compose_service(compose, cfg.service)

            def make() -> Sandbox:
                client.ensure_project(PROJECT)
                dep = client.deploy(PROJECT, Path(compose), env=f"insp-{uuid.uuid4().hex[:10]}")
                return client._sandbox_of(client.environment(str(dep.get("EnvID") or "")))
        elif cfg.image:
            def make() -> Sandbox:
                return client.sandbox(image=cfg.image, cmd=["sleep", "infinity"], project=PROJECT,
                                      egress=cfg.egress, volumes=list(cfg.volumes))
        else:
            def make() -> Sandbox:
                return client.sandbox(from_version=cfg.from_version, egress=cfg.egress)
        sbx = await anyio.to_thread.run_sync(make)
        _record(sbx, cfg, service)
        return {"default": cls(client, sbx.id, service, sbx, user=cfg.user, workdir=cfg.workdir)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        for env in environments.values():
            if isinstance(env, DenvSandbox):
                try:
                    await anyio.to_thread.run_sync(env._client.destroy, env._env_id)
                except DenvError as e:
                    logger.warning("denv: destroying %s failed: %s", env._env_id, e)

    @classmethod
    async def task_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool) -> None:
        return None

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup denv [ID]``: destroy environment ID, or without
        one every live environment of project ``inspect`` (the image sandboxes;
        a sandbox forked from a version lives in that version's project)."""
        client = Client()
        if id:
            ids = [id]
        else:
            try:
                doc = await anyio.to_thread.run_sync(client._json, "GET", f"/v1/projects/{PROJECT}/envs")
            except DenvError as e:
                if e.status == 404:
                    print("denv: no Inspect sandboxes (no project inspect)")
                    return
                raise
            ids = [str(e.get("ID")) for e in doc.get("environments") or []
                   if e.get("Status") not in ("destroyed", "destroying")]
        for env_id in ids:
            await anyio.to_thread.run_sync(client.destroy, env_id)
            print(f"denv: destroyed {env_id}")
        if not ids:
            print("denv: no live Inspect sandboxes")

    # ---- inside the sample ----

    async def _run(self, argv: list[str], timeout: int) -> Any:
        return await anyio.to_thread.run_sync(self._client.exec, self._env_id, self._service, argv, timeout)

    def _as_user(self, argv: list[str]) -> list[str]:
        """``argv`` run as the configured exec user (``su``), if one is set."""
        if self._user is None:
            return argv
        return ["su", "-s", "/bin/sh", self._user, "-c", shlex.join(argv)]

    async def _run_cancellable(self, argv: list[str], timeout: int, user: str | None = None) -> Any:
        """``_run`` of a user's command; cancelled, it kills that command in the container.

        The request's thread is abandoned at once (its answer comes when the
        command dies), and a second exec kills every process carrying this
        call's mark, so the sample stops now rather than when the command ends."""
        mark = uuid.uuid4().hex
        marked = ["sh", "-c", MARK_EXEC, "sh", mark, *argv]
        try:
            return await anyio.to_thread.run_sync(
                self._client.exec, self._env_id, self._service, marked, timeout, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            await self._kill_marked(mark, user)
            raise
        except DenvError as e:
            if _is_timeout(e):
                # denvd killed the process it started; under su the command's own
                # processes are that process's grandchildren and may live on
                await self._kill_marked(mark, user)
            raise

    async def _kill_marked(self, mark: str, user: str | None) -> None:
        """Kill the processes of one call. Root in a container lacks CAP_SYS_PTRACE
        and may not read another user's /proc/PID/environ, so the search also runs
        as the user the command ran as."""
        kill = ["sh", "-c", KILL_MARKED, "sh", mark]
        argvs = [kill]
        if user is not None and str(user) not in ("root", "0"):
            argvs.insert(0, shell_command(shlex.join(kill), user=user))
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_KILL_TIMEOUT):
            for argv in argvs:
                try:
                    await anyio.to_thread.run_sync(
                        self._client.exec, self._env_id, self._service, argv, CANCEL_KILL_TIMEOUT,
                        abandon_on_cancel=True)
                except DenvError as e:
                    logger.warning("denv: killing a command in %s failed: %s", self._env_id, e)

    async def _who(self) -> _Who:
        """The service's user and working directory, learnt once (``id``, ``pwd``)."""
        if self._whoami is None:
            r = await self._run(self._as_user(["sh", "-c", "id -u; id -g; pwd"]), 30)
            lines = r.stdout.splitlines()
            try:
                uid, gid = int(lines[0]), int(lines[1])
            except (IndexError, ValueError):
                raise RuntimeError(
                    f"denv: cannot tell the user of service {self._service} "
                    f"(id -u; id -g; pwd exited {r.exit_code}: {r.stderr.strip()[:300]!r})"
                ) from None
            workdir = lines[2].strip() if len(lines) > 2 and lines[2].startswith("/") else "/"
            if self._workdir:
                workdir = posixpath.normpath(posixpath.join(workdir, self._workdir))
            self._whoami = _Who(uid, gid, workdir)
        return self._whoami

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        """Run ``cmd``; output cut by denvd (1 MiB a stream) raises ``OutputLimitExceededError``.

        ``input`` is uploaded to a file of its own (``/tmp/.denv_stdin.<random>``,
        mode 0600, owned by the service's user), which the command gets as stdin
        and which is removed before the command starts.
        """
        if user is None:
            user = self._user
        if cwd is None:
            cwd = self._workdir
        elif self._workdir and not cwd.startswith("/"):
            cwd = posixpath.join(self._workdir, cwd)
        left: list[str] = []  # files this call leaves in the container if the command does not start
        script = shlex.join(cmd)
        if len(script) > SCRIPT_INLINE_MAX:
            path = f"{SCRIPT_PREFIX}{uuid.uuid4().hex}"
            # the shell removes the file it reads first thing (bash reads on from the open file)
            body = 'rm -f -- "$0" 2>/dev/null\n' + shell_body(script, cwd=cwd, env=env)
            await anyio.to_thread.run_sync(
                functools.partial(self._client.put_bytes, self._env_id, self._service, path,
                                  body.encode("utf-8"), mode=0o644))
            left.append(path)
            argv = shell_command("", user=user, script_file=path)
        else:
            argv = shell_command(script, cwd=cwd, env=env, user=user)
        if input is not None:
            data = input.encode("utf-8") if isinstance(input, str) else bytes(input)
            who = await self._who()
            stdin_path = f"{STDIN_PREFIX}{uuid.uuid4().hex}"
            await anyio.to_thread.run_sync(
                functools.partial(self._client.put_bytes, self._env_id, self._service, stdin_path, data,
                                  mode=0o600, uid=who.uid, gid=who.gid))
            argv = with_stdin(stdin_path, argv)
            left.append(stdin_path)
        t = int(timeout) if timeout else DEFAULT_EXEC_TIMEOUT
        try:
            r = await self._run_cancellable(argv, t, user)
        except DenvError as e:
            for path in left:
                await self._remove(path)
            if _is_timeout(e):
                raise TimeoutError(f"denv: command timed out after {t} s: {e}") from e
            raise
        if user is not None and str(user) not in ("root", "0") and left and left[0].startswith(SCRIPT_PREFIX):
            await self._remove(left[0])  # another user may not remove root's file in /tmp
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        out, err = _utf8_cut(r.stdout, limit), _utf8_cut(r.stderr, limit)
        if out is not r.stdout or err is not r.stderr:
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR, out + err)
        if r.exit_code == 126 and not r.stdout.strip() and cmd and _exec_denied(r.stderr, cmd[0]):
            # as Inspect's Docker sandbox does: the command itself could not be run
            raise PermissionError(errno.EACCES, f"Permission denied executing command: {r.stderr.strip()}", cmd[0])
        if r.truncated:
            # denvd kept the first 1 MiB of a stream and dropped the rest, so the
            # whole output Inspect allows (10 MiB) cannot be returned: say so.
            raise OutputLimitExceededError(DENV_EXEC_LIMIT_STR, r.stdout + r.stderr)
        return ExecResult(success=r.exit_code == 0, returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)

    async def _remove(self, path: str) -> None:
        """Remove a file we made, if it is still there; a failure is only logged."""
        try:
            await self._run(["rm", "-f", "--", path], 30)
        except DenvError as e:
            logger.warning("denv: removing %s failed: %s", path, e)

    async def _abs(self, file: str) -> str:
        if file.startswith("/"):
            return posixpath.normpath(file)
        who = await self._who()
        return posixpath.normpath(posixpath.join(who.workdir, file))

    async def _probe(self, script: str, path: str) -> str:
        r = await self._run(self._as_user(["sh", "-c", script, "sh", path]), 30)
        return str(r.stdout).strip()

    async def write_file(self, file: str, contents: str | bytes) -> None:
        """Write ``file`` as the service's user would: its parents are created, and a
        directory is ``IsADirectoryError``, a path that user may not write ``PermissionError``."""
        if _is_dir_alias(file):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", file)
        path = await self._abs(file)
        data = contents.encode("utf-8") if isinstance(contents, str) else bytes(contents)
        who = await self._who()
        if who.uid != 0:
            # The upload is made by Docker as root: ask first what the user may do.
            seen = await self._probe(WRITE_PROBE, path)
            if seen == "dir":
                raise IsADirectoryError(errno.EISDIR, "Is a directory", file)
            if seen != "ok":
                raise PermissionError(errno.EACCES, "Permission denied", file)
        try:
            await anyio.to_thread.run_sync(
                functools.partial(self._client.put_bytes, self._env_id, self._service, path, data,
                                  uid=who.uid, gid=who.gid))
        except DenvError as e:
            if _is_timeout(e):
                raise
            msg = e.message.lower()
            if "cannot overwrite directory" in msg or "is a directory" in msg:
                raise IsADirectoryError(errno.EISDIR, "Is a directory", file) from e
            if "permission denied" in msg or "read-only" in msg:
                raise PermissionError(errno.EACCES, "Permission denied", file) from e
            if "larger than" in msg:
                raise OutputLimitExceededError(DENV_ARCHIVE_LIMIT_STR, None) from e
            raise

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> Union[str, bytes]:
        """Read ``file`` as the service's user would (see ``SandboxEnvironment.read_file``).

        Files over Inspect's read limit raise ``OutputLimitExceededError``; a file
        over denv's 32 MiB transfer limit is read in parts.
        """
        if _is_dir_alias(file):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", file)
        path = await self._abs(file)
        who = await self._who()
        seen = ""
        if who.uid != 0:
            # Docker reads the file as root: ask first whether the user may.
            seen = await self._probe(READ_PROBE, path)
            if seen == "dir":
                raise IsADirectoryError(errno.EISDIR, "Is a directory", file)
            if seen == "denied":
                raise PermissionError(errno.EACCES, "Permission denied", file)
        for _ in range(2):  # a symbolic link is followed once
            data, link = await self._get_file(file, path, seen)
            if link is None:
                break
            path = posixpath.normpath(posixpath.join(posixpath.dirname(path), link))
        else:
            r = await self._run(["readlink", "-f", "--", path], 30)
            target = r.stdout.strip()
            if r.exit_code != 0 or not target.startswith("/"):
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", file)
            data, link = await self._get_file(file, target, seen)
            if link is not None:
                raise OSError(errno.ELOOP, "Too many levels of symbolic links", file)
        assert data is not None
        return data.decode("utf-8") if text else data

    async def _get_file(self, file: str, path: str, seen: str) -> tuple[bytes | None, str | None]:
        """The contents of the regular file at ``path``, or the target of the link there."""
        try:
            archive = await anyio.to_thread.run_sync(self._client.get_tar, self._env_id, self._service, path)
        except DenvError as e:
            if _is_timeout(e):
                raise
            msg = e.message.lower()
            if "larger than" in msg:
                return await self._get_large(file, path, seen), None
            if "permission denied" in msg:
                raise PermissionError(errno.EACCES, "Permission denied", file) from e
            probe = await self._probe(READ_PROBE, path)
            if probe == "missing":
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", file) from e
            raise
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tf:
            m = tf.next()
            if m is None:
                raise OSError(errno.EINVAL, "Not a regular file", file)
            if m.isdir():
                raise IsADirectoryError(errno.EISDIR, "Is a directory", file)
            if m.issym():
                return None, m.linkname
            if not m.isfile():
                raise OSError(errno.EINVAL, "Not a regular file", file)
            if seen == "missing":
                # Root finds it, the service's user does not: a directory on
                # the way is closed to that user.
                raise PermissionError(errno.EACCES, "Permission denied", file)
            if m.size > SandboxEnvironmentLimits.MAX_READ_FILE_SIZE:
                raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, None)
            if not m.mode & stat.S_IRUSR:
                # as Inspect's Docker sandbox does: a file its owner may not
                # read is unreadable, even to root
                raise PermissionError(errno.EACCES, "Permission denied", file)
            f = tf.extractfile(m)
            return (f.read() if f is not None else b""), None

    async def _get_large(self, file: str, path: str, seen: str) -> bytes:
        """A file whose one archive is over the API's 32 MiB: read in parts (``Client.get_parts``)."""
        r = await self._run(["sh", "-c", LARGE_PROBE, "sh", path], 30)
        kind, _, rest = r.stdout.strip().partition(" ")
        if kind == "dir":
            raise IsADirectoryError(errno.EISDIR, "Is a directory", file)
        if seen == "missing":
            raise PermissionError(errno.EACCES, "Permission denied", file)  # as in _get_file
        try:
            size, mode = (int(x, b) for x, b in zip(rest.split(), (10, 8)))
        except ValueError:
            raise OSError(errno.EIO, f"cannot tell the size of {path}: {r.stderr.strip()[:300]}", file) from None
        if size > SandboxEnvironmentLimits.MAX_READ_FILE_SIZE:
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, None)
        if not mode & stat.S_IRUSR:
            raise PermissionError(errno.EACCES, "Permission denied", file)  # as for a small file, below
        return await anyio.to_thread.run_sync(self._client.get_parts, self._env_id, self._service, path, size)

    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        return SandboxConnection(
            type="denv",
            command=f"denv exec --service {self._service} {self._env_id} -- sh",
        )
