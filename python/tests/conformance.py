"""Framework conformance against a REAL control plane and sidecar.

    DENV_SERVER=... DENV_API_KEY=... python conformance.py [client verify inspect inspect_selfcheck harbor openenv verifiers
        interop karotte hud]

Run by t/e2e-frameworks.sh, which starts bin/denv-cp and bin/denvd on this
machine. Prints TAP. A check the backend cannot do yet (a route it does not
serve, no sidecar connected) is reported as SKIP with the reason, never as
passed. Exits 1 when any check failed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import httpx
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the package, when not installed

from denv import Client, DenvError  # noqa: E402

VENV_BIN = Path(sys.executable).parent
BUSYBOX = os.environ.get("DENV_E2E_BUSYBOX", "denv-test/busybox")
DEBIAN = os.environ.get("DENV_E2E_DEBIAN", "denv-test/debian")
CHECKS = ["client", "verify", "inspect", "inspect_compose", "inspect_selfcheck", "harbor", "openenv", "verifiers", "interop", "karotte", "hud"]
# run only when named: slower, or measurements rather than pass/fail of the default suite
EXTRA_CHECKS = ["harbor_tasks"]
TOP = HERE.parent.parent


class Skip(Exception):
    """The backend cannot do this yet; the message says why."""


class Tap:
    def __init__(self) -> None:
        self.n = 0
        self.failed: list[str] = []
        self.skipped: list[str] = []

    def ok(self, cond: bool, name: str, diag: str = "") -> bool:
        self.n += 1
        print(f"{'ok' if cond else 'not ok'} {self.n} - {name}", flush=True)
        if not cond:
            self.failed.append(name)
            for line in str(diag).splitlines()[-30:]:
                print(f"#   {line}", flush=True)
        return cond

    def skip(self, name: str, reason: str) -> None:
        self.n += 1
        self.skipped.append(f"{name}: {reason}")
        print(f"ok {self.n} - {name} # SKIP {reason}", flush=True)

    def run(self, name: str, fn: Callable[[], None]) -> None:
        """One step: passes, fails (with the traceback) or is skipped."""
        try:
            fn()
        except Skip as s:
            self.skip(name, str(s))
            return
        except DenvError as e:
            if not_implemented(e):
                self.skip(name, f"the backend says: {e}")
                return
            self.ok(False, name, traceback.format_exc())
            return
        except Exception:
            self.ok(False, name, traceback.format_exc())
            return
        self.ok(True, name)


T = Tap()


def not_implemented(e: DenvError) -> bool:
    """The backend itself reports the feature as not there yet (e.g. a sidecar command)."""
    return "not implemented" in e.message


def missing_route(e: DenvError) -> bool:
    return e.status in (404, 405) or (e.status == 400 and "no route" in e.message)


class Backend:
    """What the control plane can do, learnt once and remembered for every check."""

    def __init__(self) -> None:
        self.c = Client(timeout=120)
        self.c.poll_interval = 0.2
        self._sandbox_skip: str | None = None
        self._sandbox_probed = False
        self.hosts = 0
        try:
            doc = self.c._json("GET", "/v1/hosts")
            self.hosts = sum(1 for h in doc.get("hosts") or [] if h.get("connected"))
        except DenvError as e:
            if not missing_route(e):
                raise

    def need_host(self) -> None:
        if self.hosts == 0:
            raise Skip("no sidecar (denvd) is connected to the control plane ([F6])")

    def sandbox(self, **kw: Any) -> Any:
        """c.sandbox(), with a missing route or a missing host turned into Skip."""
        if self._sandbox_skip:
            raise Skip(self._sandbox_skip)
        try:
            sbx = self.c.sandbox(**kw)
        except DenvError as e:
            if missing_route(e) and not self._sandbox_probed:
                self._sandbox_skip = f"POST /v1/sandboxes is not served yet ({e}) ([F5])"
                raise Skip(self._sandbox_skip) from None
            if not_implemented(e):
                self._sandbox_skip = f"the backend says: {e}"
                raise Skip(self._sandbox_skip) from None
            if self.hosts == 0:
                self._sandbox_skip = f"no sidecar (denvd) is connected, POST /v1/sandboxes: {e} ([F6])"
                raise Skip(self._sandbox_skip) from None
            raise
        self._sandbox_probed = True
        return sbx

    def sandboxes_usable(self) -> None:
        """Skip unless an image sandbox can be made (probes once)."""
        if not self._sandbox_probed:
            sbx = self.sandbox(image=BUSYBOX, cmd=["sleep", "infinity"])
            self.c.destroy(sbx.id)

    def feature(self, what: str, issue: str, fn: Callable[[], Any]) -> Any:
        """Call fn; a route the server does not serve becomes Skip naming the issue."""
        try:
            return fn()
        except DenvError as e:
            if missing_route(e):
                raise Skip(f"{what} is not served yet ({e}) ({issue})") from None
            raise


def tar_entry(name: str, kind: str, data: bytes = b"", target: str = "") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo(name)
        info.mode = 0o644
        if kind == "file":
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        elif kind == "symlink":
            info.type, info.linkname = tarfile.SYMTYPE, target
            tf.addfile(info)
        elif kind == "fifo":
            info.type = tarfile.FIFOTYPE
            tf.addfile(info)
    return buf.getvalue()


# ---- checks ----

def check_client(b: Backend) -> None:
    c = b.c
    state: dict[str, Any] = {}

    def create() -> None:
        state["sbx"] = b.sandbox(image=BUSYBOX, cmd=["sleep", "infinity"], volumes=["/work"])

    T.run("client: sandbox from an image", create)
    if "sbx" not in state:
        for n in ("exec", "files", "fork carries /work", "fork is isolated", "destroy"):
            T.skip(f"client: {n}", "no sandbox")
        return
    sid = state["sbx"].id

    def exec_() -> None:
        r = c.exec(sid, "main", ["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n"), r

    def files() -> None:
        c.put_bytes(sid, "main", "/work/a.txt", b"alpha")
        assert c.exec(sid, "main", ["cat", "/work/a.txt"]).stdout == "alpha"
        assert c.get_bytes(sid, "main", "/work/a.txt") == b"alpha"
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "src"
            (src / "d").mkdir(parents=True)
            (src / "d" / "f.txt").write_text("deep")
            c.put_dir(sid, "main", src, "/work/tree")
            c.get_dir(sid, "main", "/work/tree", Path(tmp) / "back")
            assert (Path(tmp) / "back" / "d" / "f.txt").read_text() == "deep"

    def file_errors() -> None:
        # what open() raises, from the host's real answers; a missing path carries no DenvError
        try:
            c.get_bytes(sid, "main", "/work/does-not-exist")
            raise AssertionError("a missing path was read")
        except FileNotFoundError as e:
            assert e.filename == "/work/does-not-exist" and e.__cause__ is None, repr(e)
        try:
            c.get_bytes(sid, "main", "/work")
            raise AssertionError("a directory was read as a file")
        except IsADirectoryError:
            pass
        try:
            c.get_bytes(sid, "main", "/work/a.txt/below")
            raise AssertionError("a path below a file was read")
        except NotADirectoryError:
            pass
        r = c.exec(sid, "main", ["sh", "-c", "ln -sf a.txt /work/link && chmod 000 /work/a.txt"])
        assert r.exit_code == 0, r
        assert c.get_bytes(sid, "main", "/work/link") == b"alpha"  # followed; read as root
        c.exec(sid, "main", ["chmod", "644", "/work/a.txt"])

    def fork() -> None:
        child = b.feature("POST /v1/envs/{id}/snapshot", "[F7]", lambda: c.fork(sid))
        state["child"] = child
        r = c.exec(child.id, "main", ["cat", "/work/a.txt"])
        assert r.stdout == "alpha", r

    def isolated() -> None:
        if "child" not in state:
            raise Skip("no fork")
        child = state["child"]
        c.put_bytes(child.id, "main", "/work/only-child.txt", b"c")
        c.put_bytes(sid, "main", "/work/a.txt", b"changed")
        assert c.exec(sid, "main", ["test", "-e", "/work/only-child.txt"]).exit_code != 0
        assert c.exec(child.id, "main", ["cat", "/work/a.txt"]).stdout == "alpha"

    def destroy() -> None:
        for s in [state.get("child"), state["sbx"]]:
            if s is not None:
                c.destroy(s.id)
                try:
                    env = c.environment(s.id)
                    assert env.get("Status") == "destroyed", env
                except DenvError as e:
                    assert e.status == 404, e

    T.run("client: exec (exit code, stdout, stderr)", exec_)
    T.run("client: files (put/get bytes, dir round trip)", files)
    T.run("client: get_bytes raises FileNotFoundError, IsADirectoryError, NotADirectoryError; follows links",
          file_errors)
    T.run("client: fork carries /work", fork)
    T.run("client: fork is isolated", isolated)
    T.run("client: destroy", destroy)


VERIFY_COMPOSE = """
x-denv:
  kind: rl-environment
  agent: { service: box }
  verifier:
    image: %(image)s
    command: ["sh", "-c", "mkdir -p /logs/verifier; if [ \\"$(cat /submission/work/answer.txt 2>/dev/null)\\" = 42 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi"]
    collect: ["/work/answer.txt"]
    timeout_sec: 120
services:
  box:
    image: %(image)s
    user: "1000:1000"
    command: ["sleep", "infinity"]
    volumes: ["work:/work"]
volumes: { work: {} }
"""


def check_verify(b: Backend) -> None:
    c = b.c
    project = f"conformance-{int(time.time())}"

    def deploy(env: str) -> str:
        b.need_host()
        c.ensure_project(project)
        dep = c.deploy(project, VERIFY_COMPOSE % {"image": BUSYBOX}, env=env, timeout_sec=300)
        return str(dep["EnvID"])

    def verify(env_id: str, resume: bool) -> Any:
        return b.feature("POST /v1/envs/{id}/verify", "[F8]", lambda: c.verify(env_id, resume=resume, timeout_sec=300))

    def correct() -> None:
        env = deploy("v-ok")
        try:
            c.put_tar(env, "box", "/work", tar_entry("answer.txt", "file", b"42"))
            v = verify(env, resume=False)
            assert v.reward == 1.0 and v.source == "reward.txt" and not v.refused, v
            assert v.evidence.get("agent_frozen") is True, v.evidence
            # frozen: a command in the agent service is refused, saying why and how to resume
            try:
                r = c.exec(env, "box", ["echo", "alive"], timeout_sec=5)
            except DenvError as e:
                assert "frozen by verify" in str(e) and "--resume" in str(e), e
            else:
                raise AssertionError(f"exec into the frozen agent was not refused: {r}")
        finally:
            c.destroy(env)

    def special(kind: str) -> Callable[[], None]:
        def run() -> None:
            env = deploy(f"v-{kind}")
            try:
                entry = (tar_entry("answer.txt", "symlink", target="/etc/passwd") if kind == "symlink"
                         else tar_entry("answer.txt", "fifo"))
                c.put_tar(env, "box", "/work", entry)
                v = verify(env, resume=True)
                assert v.reward == 0.0 and v.source == "refused", v
                assert any(kind in r for r in v.refused), v.refused
                assert v.evidence.get("agent_frozen") is False, v.evidence
                assert c.exec(env, "box", ["echo", "alive"], timeout_sec=30).stdout == "alive\n"
            finally:
                c.destroy(env)
        return run

    T.run("verify: correct answer scores 1, agent stays frozen without resume", correct)
    T.run("verify: a symlink scores 0 and is refused", special("symlink"))
    T.run("verify: a FIFO scores 0 and is refused", special("fifo"))


def sandbox_env_ids(b: Backend, project: str = "inspect") -> dict[str, str]:
    """The environments of ``project`` (Inspect's image sandboxes are made in project inspect)."""
    try:
        doc = b.c._json("GET", f"/v1/projects/{project}/envs")
    except DenvError as e:
        if e.status == 404:
            return {}
        raise
    return {e["ID"]: e.get("Status", "") for e in doc.get("environments") or []}


def inspect_eval(cwd: Path, task_file: str, log_dir: Path) -> Any:
    """``inspect eval task_file --max-sandboxes 1`` in cwd: its log, once it succeeded with accuracy 1.0."""
    env = dict(os.environ, NO_COLOR="1", INSPECT_DISPLAY="plain")
    env.pop("INSPECT_EVAL_MODEL", None)
    r = subprocess.run([str(VENV_BIN / "inspect"), "eval", task_file, "--log-dir", str(log_dir),
                        "--max-sandboxes", "1"],
                       capture_output=True, text=True, timeout=900, env=env, cwd=cwd)
    logs = sorted(log_dir.glob("*.eval"))
    assert logs, f"no eval log\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    from inspect_ai.log import read_eval_log
    log = read_eval_log(str(logs[-1]))
    assert log.status == "success", f"{log.error}\n{r.stderr[-2000:]}"
    assert log.results is not None
    acc = log.results.scores[0].metrics["accuracy"].value
    assert acc == 1.0, [s.scores for s in log.samples or []]
    return log


def check_inspect(b: Backend) -> None:
    def run() -> None:
        b.sandboxes_usable()
        before = sandbox_env_ids(b)
        tmp = Path(tempfile.mkdtemp())
        try:
            shutil.copy(HERE / "fixtures" / "inspect" / "marker_task.py", tmp / "marker_task.py")
            (tmp / "denv.yaml").write_text(f"image: {BUSYBOX}\nvolumes: [/work]\n")
            log = inspect_eval(tmp, "marker_task.py", tmp / "logs")
            after = sandbox_env_ids(b)
            new = {k: v for k, v in after.items() if k not in before}
            assert len(new) == 2, f"one environment per sample expected: {new}"
            assert all(v == "destroyed" for v in new.values()), f"not destroyed: {new}"
            # each sample's events name its environment and version
            seen = []
            for smp in log.samples or []:
                infos = [e for e in smp.events if getattr(e, "event", "") == "info" and e.source == "denv"]
                assert len(infos) == 1, f"sample {smp.id}: {len(infos)} denv info events"
                data = infos[0].data
                assert data["denv_env_id"] in new and str(data["denv_version"]).startswith("ver_"), data
                seen.append(data["denv_env_id"])
            assert sorted(seen) == sorted(new), (seen, new)
            # --max-sandboxes 1: the second sample's sandbox came after the first's was gone
            spans = sorted((smp.started_at, smp.completed_at) for smp in log.samples or [])
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), f"samples overlapped: {spans}"
            assert log.eval.config.max_sandboxes == 1, log.eval.config
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def status(env_id: str) -> str:
        try:
            return str(b.c.environment(env_id).get("Status"))
        except DenvError as e:
            if e.status == 404:
                return "destroyed"
            raise

    def cleanup() -> None:
        b.sandboxes_usable()
        inspect = str(VENV_BIN / "inspect")
        one = b.c.sandbox(image=BUSYBOX, cmd=["sleep", "infinity"], project="inspect")
        two = b.c.sandbox(image=BUSYBOX, cmd=["sleep", "infinity"], project="inspect")
        r = subprocess.run([inspect, "sandbox", "cleanup", "denv", one.id], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-1500:]
        assert status(one.id) == "destroyed", r.stdout
        assert status(two.id) != "destroyed", "cleanup of one id destroyed another"
        r = subprocess.run([inspect, "sandbox", "cleanup", "denv"], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-1500:]
        assert status(two.id) == "destroyed", r.stdout[-1500:]

    T.run("inspect: eval (--max-sandboxes 1) with mockllm/model through the entry point, accuracy 1.0, "
          "environments destroyed, each sample's env id and version in its events, samples one after the other", run)
    T.run("inspect: `inspect sandbox cleanup denv ID` destroys that one, without ID every Inspect sandbox", cleanup)
    check_inspect_sandbox(b)


def check_inspect_compose(b: Backend) -> None:
    """An Inspect eval whose sandbox is a compose file with build: (issue #18)."""
    def compose_build() -> None:
        b.sandboxes_usable()
        before = sandbox_env_ids(b)
        tmp = Path(tempfile.mkdtemp())
        try:
            task_dir = tmp / "task"
            shutil.copytree(HERE / "fixtures" / "inspect" / "compose_build", task_dir)
            # This run's own content: a new context digest, so the first sample builds.
            (task_dir / "app" / "run.txt").write_text(f"{tmp}\n")
            log = inspect_eval(task_dir, "build_task.py", tmp / "logs")
            # (the project's own first environment, made with it, is not a sample's)
            new = [k for k in sandbox_env_ids(b) if k not in before
                   and str(b.c.environment(k).get("Name", "")).startswith("insp-")]
            assert len(new) == 2, f"one environment per sample expected: {new}"
            assert all(b.c.environment(k)["Status"] == "destroyed" for k in new), "a sample's env is left"
            # each sample deployed the compose file: the first built, the second found it cached
            cached = []
            for env_id in new:
                deps = b.c._json("GET", f"/v1/envs/{env_id}/deployments").get("deployments") or []
                preps = [p for d in deps for p in b.c.deployment(d["ID"])["phases"] if p["Name"] == "prepare"]
                assert len(preps) == 1, f"{env_id}: {len(preps)} prepare phases"
                prep = preps[0]
                builds = (prep.get("Evidence") or {}).get("builds") or []
                assert len(builds) == 1 and builds[0]["service"] == "default", builds
                cached.append(builds[0]["cached"])
                tags = builds[0]["image"]
            assert sorted(cached) == [False, True], f"cached per sample: {cached}"
            subprocess.run(["docker", "rmi", "-f", tags], capture_output=True, timeout=60)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    T.run("inspect: eval on sandbox (\"denv\", \"compose.yaml\") whose service has build: (FROM the fixture), "
          "accuracy 1.0, the first sample's deploy builds, the second's is cached", compose_build)


NOBODY_COMPOSE = """
services:
  main:
    image: %(image)s
    user: "65534:65534"
    command: ["sleep", "infinity"]
"""


def check_inspect_sandbox(b: Backend) -> None:
    """The Inspect sandbox's contract on a service whose user is not root."""
    import asyncio
    from inspect_ai.util import OutputLimitExceededError
    from denv.inspect import STDIN_PREFIX, DenvSandbox

    c = b.c
    state: dict[str, Any] = {}

    def deploy() -> None:
        b.need_host()
        project = f"conformance-inspect-{int(time.time())}"
        c.ensure_project(project)
        dep = c.deploy(project, NOBODY_COMPOSE % {"image": BUSYBOX}, env="nobody", timeout_sec=300)
        state["env"] = str(dep["EnvID"])
        state["sb"] = DenvSandbox(c, state["env"], "main")

    def sandbox() -> Any:
        if "sb" not in state:
            raise Skip("no environment")
        return state["sb"]

    def stdin() -> None:
        sb = sandbox()

        async def go() -> None:
            # both uploads are made before either command reads its input
            cmd = ["sh", "-c", "sleep 1; cat; id -u"]
            ra, rb = await asyncio.gather(sb.exec(cmd, input="input-A\n"), sb.exec(cmd, input=b"input-B\n"))
            assert (ra.stdout, rb.stdout) == ("input-A\n65534\n", "input-B\n65534\n"), (ra, rb)
            left = await sb.exec(["sh", "-c", f"ls -a {posix_dir(STDIN_PREFIX)}"])
            assert posix_base(STDIN_PREFIX) not in left.stdout, f"input files left behind: {left.stdout}"
        asyncio.run(go())

    def permissions() -> None:
        sb = sandbox()

        async def go() -> None:
            c.put_bytes(state["env"], "main", "/tmp/root-only", b"secret", mode=0o600)
            try:
                await sb.read_file("/tmp/root-only")
                raise AssertionError("a root-only file was read by the service's user")
            except PermissionError as e:
                assert e.filename == "/tmp/root-only", e
            try:
                await sb.write_file("/tmp/root-only", "mine now")
                raise AssertionError("a root-only file was written by the service's user")
            except PermissionError:
                pass
            assert c.get_bytes(state["env"], "main", "/tmp/root-only") == b"secret"
            await sb.write_file("/tmp/own/f.txt", "ok\r\n")
            assert await sb.read_file("/tmp/own/f.txt") == "ok\r\n"
            ls = await sb.exec(["ls", "-ln", "/tmp/own/f.txt"])
            assert ls.stdout.split()[2:4] == ["65534", "65534"], ls.stdout
            for path, err in (("/tmp/none", FileNotFoundError), ("/etc", IsADirectoryError),
                              ("/tmp/own", IsADirectoryError)):
                try:
                    await sb.read_file(path)
                    raise AssertionError(f"{path} was read")
                except err:
                    pass
        asyncio.run(go())

    def output_limit() -> None:
        sb = sandbox()

        async def go() -> None:
            try:
                await sb.exec(["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a"])
                raise AssertionError("3 MB of output came back without an error")
            except OutputLimitExceededError as e:
                assert e.limit_str == "1 MiB", e
                assert e.truncated_output == "a" * (1 << 20), len(e.truncated_output or "")
            r = await sb.exec(["sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' a"])
            assert r.stdout == "a" * 1000000, len(r.stdout)
        asyncio.run(go())

    def cancel() -> None:
        sb = sandbox()

        async def go() -> None:
            import anyio
            mark = f"cancel_{os.getpid()}_{int(time.time())}"
            t0 = time.monotonic()
            with anyio.move_on_after(1.5):
                await sb.exec(["sh", "-c", f"echo {mark} >/dev/null; sleep 120; :"], timeout=300)
            after = time.monotonic() - t0 - 1.5
            assert after < 2.0, f"the cancelled exec returned {after:.1f} s after the cancel"
            ps = await sb.exec(["sh", "-c", f"ps | grep {mark} | grep -v grep"])
            assert ps.stdout.strip() == "", f"the cancelled command still runs: {ps.stdout}"
            print(f"# a cancelled exec returned {after:.2f} s after the cancel, its command killed", flush=True)

        asyncio.run(go())

    try:
        T.run("inspect sandbox: a compose service running as nobody", deploy)
        T.run("inspect sandbox: two concurrent execs with input= each get their own, no files left", stdin)
        T.run("inspect sandbox: read/write_file as nobody: root-only file is PermissionError, "
              "missing FileNotFoundError, directory IsADirectoryError", permissions)
        T.run("inspect sandbox: output cut by denvd raises OutputLimitExceededError with what came back",
              output_limit)
        T.run("inspect sandbox: a cancelled exec is killed in the container, the caller free within 2 s", cancel)
    finally:
        if "env" in state:
            c.destroy(state["env"])


def posix_dir(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def posix_base(path: str) -> str:
    return path.rsplit("/", 1)[1]


# Inspect's self-check runs on these: root on both fixture images, and a user
# of the Debian image that is not root (Inspect's runner has a root and a
# non-root Docker sandbox too).
SELFCHECK_SANDBOXES = [DEBIAN, BUSYBOX, f"{DEBIAN},user=nobody,workdir=/tmp"]


def check_inspect_selfcheck(b: Backend) -> None:
    """Inspect's own sandbox checks (its self_check module, imported) on denv sandboxes."""
    for spec in SELFCHECK_SANDBOXES:
        def run(spec: str = spec) -> None:
            b.sandboxes_usable()
            r = subprocess.run([sys.executable, str(HERE / "inspect_selfcheck.py"), spec],
                               capture_output=True, text=True, timeout=1800,
                               env=dict(os.environ, PYTHONPATH=str(HERE.parent)))
            for line in r.stdout.splitlines():
                if not line.startswith("ok "):
                    print(f"# {line}", flush=True)
            assert r.returncode == 0, (r.stdout.splitlines() or [""])[-1] + r.stderr[-1500:]

        T.run(f"inspect: Inspect's own self-check on a denv sandbox of {spec}", run)


def check_harbor(b: Backend) -> None:
    def run() -> None:
        b.sandboxes_usable()
        tmp = Path(tempfile.mkdtemp())
        try:
            task = tmp / "hello"
            shutil.copytree(HERE / "fixtures" / "harbor" / "hello", task)
            toml = (task / "task.toml").read_text().replace('"denv-test/debian"', json.dumps(DEBIAN))
            (task / "task.toml").write_text(toml)
            env = harbor_env()
            r = subprocess.run(
                [str(VENV_BIN / "harbor"), "run", "-p", str(task), "-a", "oracle", "-e", "denv.harbor:DenvEnvironment",
                 "-y", "-o", str(tmp / "jobs"), "-n", "1", "-q"],
                capture_output=True, text=True, timeout=900, env=env, cwd=tmp)
            results = sorted((tmp / "jobs").glob("*/*/result.json"))
            assert results, f"no trial result\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
            doc = json.loads(results[0].read_text())
            reward = ((doc.get("verifier_result") or {}).get("rewards") or {}).get("reward")
            assert reward == 1, json.dumps(doc, indent=1)[-3000:]
            trial = results[0].parent
            assert (trial / "verifier" / "reward.txt").read_text().strip() == "1"
            assert (trial / "agent" / "oracle.txt").is_file(), "agent logs were not downloaded"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    T.run("harbor: oracle agent on the fixture task, reward 1, logs downloaded", run)


def harbor_env() -> dict[str, str]:
    """Harbor offline, importing this checkout's denv (the venv's editable
    install may point at another one)."""
    return dict(os.environ, HARBOR_TELEMETRY="0", LITELLM_LOCAL_MODEL_COST_MAP="True", NO_COLOR="1",
                PYTHONPATH=str(HERE.parent))


# t/fixtures/harbor: task -> (every trial scores 1, or the words its trials fail with)
HARBOR_TASKS: dict[str, str | None] = {
    "shared-dockerfile": None,
    "separate-dockerfile": None,
    "docker-image": None,
    "compose-two": None,
    "build-fails": "this step fails on purpose",
    "gpu-refused": "no GPU passthrough",
}
HARBOR_ATTEMPTS = 2


def harbor_trials(jobs: Path) -> dict[str, list[dict[str, Any]]]:
    """The job's trial results by task name."""
    out: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(jobs.glob("*/*/result.json")):
        doc = json.loads(p.read_text())
        out.setdefault(str(doc.get("task_name", "")).split("/")[-1], []).append(doc)
    return out


def check_harbor_tasks(b: Backend) -> None:
    """harbor run -a oracle -k 2 on t/fixtures/harbor: the layouts harbor init writes."""
    tmp = Path(tempfile.mkdtemp())
    state: dict[str, Any] = {}

    def run() -> None:
        b.sandboxes_usable()
        shutil.copytree(TOP / "t" / "fixtures" / "harbor", tmp / "tasks")
        r = subprocess.run(
            [str(VENV_BIN / "harbor"), "run", "-p", str(tmp / "tasks"), "-a", "oracle",
             "-e", "denv.harbor:DenvEnvironment", "-k", str(HARBOR_ATTEMPTS),
             "-n", os.environ.get("DENV_E2E_HARBOR_N", "2"),  # 1: attempts run one after the other
             "-y", "-o", str(tmp / "jobs"), "-q"],
            capture_output=True, text=True, timeout=1800, env=harbor_env(), cwd=tmp)
        state["out"] = f"exit {r.returncode}\n{r.stdout[-2500:]}\n{r.stderr[-2500:]}"
        jobs = [p for p in (tmp / "jobs").glob("*/result.json")]
        assert jobs, f"no result.json for the job\n{state['out']}"
        state["trials"] = harbor_trials(tmp / "jobs")
        keep = os.environ.get("DENV_E2E_KEEP")
        if keep:  # a place to read the job's files afterwards
            shutil.copytree(tmp / "jobs", Path(keep) / "jobs", dirs_exist_ok=True)

    T.run("harbor tasks: harbor run -k 2 over t/fixtures/harbor finishes with the job's result.json", run)
    if "trials" not in state:  # skipped or failed above, with the reason
        shutil.rmtree(tmp, ignore_errors=True)
        return
    trials: dict[str, list[dict[str, Any]]] = state["trials"]
    for task, fails_with in HARBOR_TASKS.items():
        got = trials.get(task, [])
        if fails_with is None:
            rewards = [((d.get("verifier_result") or {}).get("rewards") or {}).get("reward") for d in got]
            errors = [(d.get("exception_info") or {}).get("exception_message") for d in got]
            T.ok(rewards == [1] * HARBOR_ATTEMPTS,
                 f"harbor tasks: {task}: both attempts score 1", f"rewards {rewards}, errors {errors}")
        else:
            msgs = [str((d.get("exception_info") or {}).get("exception_message") or "") for d in got]
            T.ok(len(msgs) == HARBOR_ATTEMPTS and all(fails_with in m for m in msgs),
                 f"harbor tasks: {task}: its {HARBOR_ATTEMPTS} trials fail with the reason ({fails_with!r})",
                 "\n".join(msgs) or state.get("out", ""))
    envs = [e for e in b.c._json("GET", "/v1/projects/sandboxes/envs").get("environments") or []
            if str(e.get("Name", "")).startswith("harbor-")]
    for task, fails_with in HARBOR_TASKS.items():
        if fails_with is not None:
            continue
        for role in ("__env",) + (("__verifier__trial",) if task.startswith("separate") else ()):
            mine = [e for e in envs if e["Name"].startswith(f"harbor-{task}__") and e["Name"].endswith(role)]
            forked = [e for e in mine if e.get("ParentVersionID")]
            T.ok(len(mine) == HARBOR_ATTEMPTS and len(forked) == HARBOR_ATTEMPTS - 1,
                 f"harbor tasks: {task}{role}: one attempt deployed, the other forked its prepared version",
                 json.dumps([{k: e.get(k) for k in ("Name", "ParentVersionID", "Status")} for e in mine]))
    shutil.rmtree(tmp, ignore_errors=True)


def check_openenv(b: Backend) -> None:
    from denv.openenv import DenvProvider

    state: dict[str, Any] = {}

    def start() -> None:
        b.sandboxes_usable()
        p = DenvProvider(client=b.c)  # egress deny, the default: the port goes through denvd's ingress proxy
        assert p.egress == "deny"
        state["p"] = p
        url = p.start_container(DEBIAN, port=8000, cmd=["python3", "-m", "http.server", "8000"])
        p.wait_for_ready(url, timeout_s=60)

    def fork() -> None:
        if "p" not in state:
            raise Skip("no provider")
        child = b.feature("POST /v1/envs/{id}/snapshot", "[F7]", lambda: state["p"].fork(timeout_s=60))
        state["child"] = child
        assert child.base_url, "the fork published no endpoint"
        # fork() returned only once the child's server answered: it answers now
        r = httpx.get(f"{child.base_url}/health", timeout=5, trust_env=False)
        assert r.status_code < 500, f"the fork answered {r.status_code} right after fork()"

    def stop() -> None:
        if "p" not in state:
            raise Skip("no provider")
        for p in (state.get("child"), state["p"]):
            if p is not None:
                env_id = p.env_id
                p.stop_container()
                try:
                    assert b.c.environment(env_id).get("Status") == "destroyed"
                except DenvError as e:
                    assert e.status == 404, e

    def built() -> None:
        b.sandboxes_usable()
        from openenv.core.generic_client import GenericEnvClient
        tmp = Path(tempfile.mkdtemp())
        p = DenvProvider(client=b.c)
        try:
            ctx = tmp / "echo_env"
            shutil.copytree(TOP / "t" / "fixtures" / "openenv" / "echo_env", ctx)
            (ctx / "run.txt").write_text(f"{tmp}\n")  # this run's own context: it builds
            url = p.start_container("", port=8000, build=str(ctx), dockerfile="server/Dockerfile")
            p.wait_for_ready(url, timeout_s=60)
            with GenericEnvClient(base_url=url).sync() as env:
                first = env.reset()
                assert first.observation.get("echoed_message") == "Echo environment ready!", first
                r = env.step({"message": "hello denv"})
                assert r.observation.get("echoed_message") == "hello denv" and abs((r.reward or 0) - 1.0) < 1e-9, r
                assert env.state().get("step_count") == 1
            deps = b.c._json("GET", f"/v1/envs/{p.env_id}/deployments").get("deployments") or []
            builds = [ph.get("Evidence", {}).get("builds") for d in deps for ph in b.c.deployment(d["ID"])["phases"]
                      if ph["Name"] == "prepare"]
            assert builds and builds[0] and builds[0][0]["cached"] is False, builds
            state["built_tag"] = builds[0][0]["image"]
        finally:
            p.stop_container()
            if state.get("built_tag"):
                subprocess.run(["docker", "rmi", "-f", state["built_tag"]], capture_output=True, timeout=60)
            shutil.rmtree(tmp, ignore_errors=True)

    T.run("openenv: http.server image started through DenvProvider (egress deny), ready", start)
    T.run("openenv: a server built from server/Dockerfile (openenv init's layout, FROM the fixture) starts "
          "through DenvProvider(build=...); openenv-core's GenericEnvClient resets and steps it over /ws", built)
    T.run("openenv: fork returns once the child answers /health", fork)
    T.run("openenv: stopped", stop)


def check_verifiers(b: Backend) -> None:
    """denv.verifiers: Prime's client surface on real sandboxes, then verifiers' own runtimes on it."""
    try:
        import asyncio
        from unittest import mock

        import prime_sandboxes as ps
        from verifiers.v1.runtimes import PrimeConfig, PrimeRuntime

        from denv.verifiers import AsyncDenvSandboxClient, DenvConfig, DenvRuntime, DenvSandboxClient
    except ImportError as e:
        for n in ("client surface", "fork from a checkpoint", "verifiers PrimeRuntime on denv",
                  "verifiers DenvRuntime"):
            T.skip(f"verifiers: {n}", f"verifiers or prime-sandboxes is not installed ({e})")
        return
    sc = DenvSandboxClient(b.c)
    state: dict[str, Any] = {}

    def surface() -> None:
        b.sandboxes_usable()
        sbx = sc.create(ps.CreateSandboxRequest(name="vf-surface", docker_image=BUSYBOX, labels=["vf-e2e"]))
        state["sbx"] = sbx
        sc.wait_for_creation(sbx.id)
        assert sc.get(sbx.id).status == "RUNNING"
        r = sc.execute_command(sbx.id, "echo $X; pwd; echo err >&2; exit 3", working_dir="/tmp", env={"X": "x y"})
        assert (r.exit_code, r.stdout, r.stderr) == (3, "x y\n/tmp\n", "err\n"), r
        sc.upload_bytes(sbx.id, "/work/in/a.txt", b"alpha", "a.txt")
        assert sc.read_file(sbx.id, "/work/in/a.txt").content == "alpha"
        job = sc.start_background_job(sbx.id, "sleep 1; cat /work/in/a.txt; echo e >&2; exit 4")
        assert not sc.get_background_job(sbx.id, job).completed
        done = sc.run_background_job(sbx.id, "cat /work/in/a.txt", timeout=60, poll_interval=1)
        assert (done.exit_code, done.stdout) == (0, "alpha"), done
        deadline = time.monotonic() + 30
        while not (st := sc.get_background_job(sbx.id, job)).completed and time.monotonic() < deadline:
            time.sleep(0.5)
        assert (st.exit_code, st.stdout, st.stderr) == (4, "alpha", "e\n"), st
        try:
            sc.read_file(sbx.id, "/work/missing")
            raise AssertionError("a missing file was read")
        except ps.SandboxFileNotFoundError:
            pass
        try:
            sc.execute_command(sbx.id, "sleep 5", timeout=1)
            raise AssertionError("no timeout")
        except ps.CommandTimeoutError:
            pass

    def fork() -> None:
        if "sbx" not in state:
            raise Skip("no sandbox")
        cp = b.feature("POST /v1/envs/{id}/snapshot", "[F7]", lambda: sc.checkpoint(state["sbx"].id))
        child = sc.create(ps.CreateSandboxRequest(name="vf-child", checkpoint_id=cp.id, labels=["vf-e2e"]))
        state["child"] = child
        assert sc.read_file(child.id, "/work/in/a.txt").content == "alpha"
        out = sc.bulk_delete(labels=["vf-e2e"])
        assert sorted(out.succeeded) == sorted([state["sbx"].id, child.id]) and not out.failed, out

    def prime_runtime() -> None:
        # verifiers' own prime runtime, its code unchanged, with this client where Prime's would be
        b.sandboxes_usable()

        async def go() -> None:
            rt = PrimeRuntime(PrimeConfig(image=BUSYBOX, workdir="/work"))
            await rt.start()
            try:
                r = await rt.run(["sh", "-c", "echo $0 $V; pwd", "hi"], {"V": "v"})
                assert (r.exit_code, r.stdout) == (0, "hi v\n/work\n"), r
                await rt.write("rel/b.bin", b"\x00\xffbin")
                assert await rt.read("/work/rel/b.bin") == b"\x00\xffbin"
                assert await rt.alive()
            finally:
                await rt.stop()
            try:
                b.c.exec(rt.info.id, "main", ["true"])
                raise AssertionError("the sandbox outlived stop()")
            except DenvError:
                pass

        with mock.patch.dict(os.environ, {"PRIME_API_KEY": "unused-by-denv"}), \
                mock.patch.object(ps, "AsyncSandboxClient", lambda **kw: AsyncDenvSandboxClient(b.c, **kw)):
            asyncio.run(asyncio.wait_for(go(), 300))

    def denv_runtime() -> None:
        b.sandboxes_usable()

        async def go() -> None:
            rt = DenvRuntime(DenvConfig(image=DEBIAN, workdir="/work"), client=b.c)
            await rt.start()
            try:
                nobody = rt.with_user("nobody")
                r = await nobody.run(["id", "-un"], {})
                assert (r.exit_code, r.stdout) == (0, "nobody\n"), r
                await nobody.write("/tmp/by-nobody.txt", b"mine")
                r = await rt.run(["stat", "-c", "%U", "/tmp/by-nobody.txt"], {})
                assert r.stdout == "nobody\n", r
                assert await nobody.read("/tmp/by-nobody.txt") == b"mine"
                await rt.run(["sh", "-c", "echo secret > /root-only; chmod 600 /root-only"], {})
                for op in (nobody.read("/root-only"), nobody.write("/work/denied.txt", b"x")):
                    try:
                        await op
                        raise AssertionError("nobody got past the file's permissions")
                    except Exception as e:
                        assert "ermission denied" in str(e), e
                view = rt.with_env({"V": "from-view"})
                r = await view.run(["sh", "-c", "echo $V; pwd"], {})
                assert (r.exit_code, r.stdout) == (0, "from-view\n/work\n"), r
                await rt.write("x.txt", b"0123456789")
                assert await rt.read("x.txt") == b"0123456789"
                try:
                    await rt.read("x.txt", max_bytes=4)
                    raise AssertionError("read past max_bytes")
                except Exception as e:
                    assert "limit" in str(e), e
                assert await rt.alive()
            finally:
                await rt.stop()
            assert not await rt.alive()

        asyncio.run(asyncio.wait_for(go(), 300))

    T.run("verifiers: DenvSandboxClient (create, exec, files, background jobs, errors as Prime's)", surface)
    T.run("verifiers: checkpoint is a denv version; create(checkpoint_id) forks it; bulk_delete by label", fork)
    T.run("verifiers: verifiers' PrimeRuntime (start, run, write, read, stop) on AsyncDenvSandboxClient",
          prime_runtime)
    T.run("verifiers: DenvRuntime through verifiers' runtime contract (with_user, with_env, read max_bytes, alive, stop)",
          denv_runtime)


# ---- denv import / export (harbor, openenv) ----

# Fixture tasks of t/fixtures/harbor that go round the trip: an image task
# with caps, a Dockerfile task, a compose task with a second service.
INTEROP_TASKS = ("docker-image", "shared-dockerfile", "compose-two")


def denv_cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    """bin/denv with DENV_PYTHON set to this Python (import and export run denv.interop)."""
    env = dict(harbor_env(), DENV_PYTHON=sys.executable)
    return subprocess.run([str(TOP / "bin" / "denv"), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def harbor_rewards(tasks: Path, jobs: Path, *extra: str) -> dict[str, Any]:
    """harbor run -a oracle over every task under tasks: reward by task name (None: no reward)."""
    r = subprocess.run(
        [str(VENV_BIN / "harbor"), "run", "-p", str(tasks), "-a", "oracle", *extra,
         "-n", "2", "-y", "-o", str(jobs), "-q"],
        capture_output=True, text=True, timeout=1800, env=harbor_env(), cwd=jobs.parent)
    out: dict[str, Any] = {"_out": f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"}
    for name, docs in harbor_trials(jobs).items():
        d = docs[0]
        out[name] = ((d.get("verifier_result") or {}).get("rewards") or {}).get("reward")
        if out[name] is None:
            out["_out"] += f"\n{name}: {(d.get('exception_info') or {}).get('exception_message')}"
    return out


def oracle_on_denv(b: Backend, env_id: str, solution: Path) -> float | None:
    """Harbor's oracle by hand on an imported project: solution/ to /solution, solve.sh as the
    agent (the service's own user), then denv verify's reward."""
    b.c.put_dir(env_id, "main", solution, "/solution")
    r = b.c.exec(env_id, "main", ["sh", "-c", "bash /solution/solve.sh"], timeout_sec=120)
    assert r.exit_code == 0, f"solve.sh: {r.exit_code} {r.stdout}{r.stderr}"
    v = b.c.verify(env_id, timeout_sec=300)
    return v.reward


def check_interop(b: Backend) -> None:
    tmp = Path(tempfile.mkdtemp())
    st: dict[str, Any] = {"versions": {}, "envs": []}
    fixtures = TOP / "t" / "fixtures" / "harbor"

    def originals() -> None:
        b.sandboxes_usable()
        (tmp / "orig").mkdir()
        for t in INTEROP_TASKS:
            shutil.copytree(fixtures / t, tmp / "orig" / t)
        st["orig"] = harbor_rewards(tmp / "orig", tmp / "jobs-orig", "-e", "denv.harbor:DenvEnvironment")
        assert all(st["orig"].get(t) == 1 for t in INTEROP_TASKS), st["orig"]

    T.run(f"interop: harbor run -a oracle on the original tasks ({', '.join(INTEROP_TASKS)}) on denv: reward 1",
          originals)

    for t in INTEROP_TASKS:
        def imp(t: str = t) -> None:
            b.sandboxes_usable()
            proj = tmp / "proj" / t
            r = denv_cli("import", "harbor", str(fixtures / t), "-o", str(proj), "--deploy",
                         "--project", f"imp-{t}")
            assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
            words = r.stdout.split()
            env_id = words[words.index("environment") + 1]
            st["versions"][t] = words[words.index("version") + 1]
            assert (proj / "tasks" / t / "tests" / "test.sh").is_file()
            reward = oracle_on_denv(b, env_id, proj / "tasks" / t / "solution")
            assert reward == 1, f"denv verify reward {reward}"
            # an agent that did nothing scores 0 through the same verifier
            idle = b.c.sandbox(from_version=st["versions"][t], timeout_sec=300)
            try:
                assert b.c.verify(idle.id, timeout_sec=300).reward == 0
            finally:
                b.c.destroy(idle.id)
            st["envs"].append(env_id)  # destroyed at the end: the OpenEnv export forks its version

        T.run(f"interop: denv import harbor {t} --deploy; oracle + denv verify: 1, no agent: 0", imp)

    def export() -> None:
        if len(st["versions"]) != len(INTEROP_TASKS):
            raise Skip("an import above failed")
        out = tmp / "exported"
        for t, ver in st["versions"].items():
            r = denv_cli("export", "--harbor", f"imp-{t}@{ver}", str(out), "--project-dir", str(tmp / "proj" / t))
            assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
            toml = (out / t / "task.toml").read_text()
            assert ver in toml, toml
            if t != "compose-two":
                assert 'docker_image = "sha256:' in toml, toml
        st["exp"] = harbor_rewards(out, tmp / "jobs-exp", "-e", "denv.harbor:DenvEnvironment")
        got = {t: st["exp"].get(t) for t in INTEROP_TASKS}
        want = {t: st["orig"].get(t) for t in INTEROP_TASKS} if "orig" in st else {t: 1 for t in INTEROP_TASKS}
        assert got == want, f"exported {got}, original {want}\n{st['exp']['_out']}"

    T.run("interop: denv export --harbor of each imported version; harbor run -a oracle on denv: "
          "the original's reward", export)

    def export_docker() -> None:
        r = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if r.returncode != 0:
            raise Skip("Harbor's Docker environment needs the docker compose v2 plugin, which this host lacks")
        if "exp" not in st:
            raise Skip("the export above failed")
        got = harbor_rewards(tmp / "exported", tmp / "jobs-docker")
        assert all(got.get(t) == 1 for t in INTEROP_TASKS), got

    T.run("interop: the exported tasks under harbor run -a oracle on Docker: reward 1", export_docker)

    def openenv() -> None:
        t = "docker-image"
        if t not in st["versions"]:
            raise Skip("its import failed")
        out = tmp / "openenv"
        r = denv_cli("export", "--openenv", f"imp-{t}@{st['versions'][t]}", str(out))
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        assert st["versions"][t] in (out / "openenv.yaml").read_text()
        assert (out / "Dockerfile").read_text().count("FROM sha256:") == 1
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(harbor_env(), PYTHONPATH=f"{out}:{HERE.parent}")
        srv = subprocess.Popen([sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1",
                                "--port", str(port)], cwd=out, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            from openenv.core.generic_client import GenericEnvClient

            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2, trust_env=False).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.3)
            with GenericEnvClient(base_url=f"http://127.0.0.1:{port}").sync() as cl:
                first = cl.reset()
                env_id = first.observation["env_id"]
                assert env_id.startswith("env_"), first
                res = cl.step({"command": "cat /app/README.md; id -u"})
                obs = res.observation
                assert "uploaded" in obs["stdout"] and obs["stdout"].split()[-1] == "1000", obs
                assert b.c.environment(env_id).get("ParentVersionID") == st["versions"][t]
        finally:
            srv.terminate()
            try:
                srv.wait(timeout=10)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()

    T.run("interop: denv export --openenv; its server's reset forks the version, step runs in it "
          "(OpenEnv's own client)", openenv)
    for env_id in st["envs"]:
        b.c.destroy(env_id)
    shutil.rmtree(tmp, ignore_errors=True)


KAROTTE_ENV = TOP / "t" / "fixtures" / "karotte" / "min-env"
KAROTTE_ANSWER = "/workdir/data/answer.txt"


def karotte_judge(answer: bytes | None) -> float:
    """Karotte's own ExecutableJudge (the package's class, run as Karotte runs it) on answer."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "answer.txt"
        if answer is not None:
            path.write_bytes(answer)
        code = ("import sys; from karotte.judges import ExecutableJudge; "
                "from karotte.schemas.transcript import Transcript; "
                "j = ExecutableJudge([sys.executable, '-m', 'environment.judges.sum_answer', sys.argv[1], 'score.json']); "
                "print(j.evaluate(Transcript(run_id='denv')).score)")
        env = dict(harbor_env(), PYTHONPATH=str(KAROTTE_ENV / "src"))
        r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                           timeout=120, env=env, cwd=d)
        assert r.returncode == 0, r.stderr[-2000:]
        return float(r.stdout.strip().splitlines()[-1])


def check_karotte(b: Backend) -> None:
    tmp = Path(tempfile.mkdtemp())
    st: dict[str, Any] = {}

    def imp() -> None:
        b.sandboxes_usable()
        try:
            import karotte  # noqa: F401
        except ImportError:
            raise Skip("karotte is not installed (t/requirements-nodeps.txt)") from None
        r = denv_cli("import", "karotte", str(KAROTTE_ENV), "-o", str(tmp / "proj"), "--deploy",
                     "--project", "karotte-min")
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
        words = r.stdout.split()
        st["env"] = words[words.index("environment") + 1]
        st["version"] = words[words.index("version") + 1]
        doc = yaml.safe_load((tmp / "proj" / "docker-compose.yaml").read_text())
        assert doc["x-denv"]["verifier"]["collect"] == [KAROTTE_ANSWER], doc["x-denv"]
        assert (tmp / "proj" / "tasks" / "fix-backup" / "instruction.md").read_text().count("numbers.txt") == 1

    T.run("karotte: denv import karotte (tasks read by Karotte's loader) --deploy", imp)

    def episode(student: str) -> tuple[Any, bytes | None]:
        """A fork of the imported version; the student's command as the student; denv verify."""
        if "version" not in st:
            raise Skip("the import failed")
        sbx = b.c.sandbox(from_version=st["version"], timeout_sec=300)
        try:
            r = b.c.exec(sbx.id, "karotte", ["sh", "-c", student + "; id -u"], timeout_sec=60)
            assert r.exit_code == 0 and r.stdout.split()[-1] == "1000", f"{r.exit_code} {r.stdout} {r.stderr}"
            kind = b.c.exec(sbx.id, "karotte", ["sh", "-c", f"test -L {KAROTTE_ANSWER} && echo link"])
            answer = None
            if "link" not in kind.stdout:
                answer = b.c.exec(sbx.id, "karotte", ["cat", KAROTTE_ANSWER]).stdout.encode()
            return b.c.verify(sbx.id, timeout_sec=300), answer
        finally:
            b.c.destroy(sbx.id)

    for label, student, want in (
        ("right answer", f"awk '{{s += $1}} END {{print s}}' /workdir/data/numbers.txt > {KAROTTE_ANSWER}", 1.0),
        ("wrong answer", f"echo 41 > {KAROTTE_ANSWER}", 0.0),
    ):
        def judged(student: str = student, want: float = want) -> None:
            v, answer = episode(student)
            own = karotte_judge(answer)
            assert v.reward == own == want, f"denv verify {v.reward} ({v.source}), Karotte's judge {own}"

        T.run(f"karotte: fork, student step as uid 1000, denv verify equals Karotte's own judge ({label})", judged)

    def symlink() -> None:
        v, _ = episode(f"ln -sf /etc/shadow {KAROTTE_ANSWER}")
        assert v.reward == 0 and v.source == "refused", f"{v.reward} {v.source} {v.refused}"

    T.run("karotte: a symlink in the submission path scores 0 (refused)", symlink)
    if "env" in st:
        b.c.destroy(st["env"])
    shutil.rmtree(tmp, ignore_errors=True)


# ---- HUD ----

HUD_PY = TOP / "python" / ".venv-hud" / "bin" / "python"  # hud 0.6 needs Python < 3.13 (t/deps.sh)
HUD_FIXTURE = TOP / "t" / "fixtures" / "hud" / "letter-count"
HUD_IMAGE = os.environ.get("DENV_E2E_HUD_IMAGE", "")


def hud_image_tag() -> str:
    """The test image's tag: a digest of what goes into it (the fixture's files,
    the venv's interpreter and requirements), so a changed venv builds anew."""
    h = hashlib.sha256()
    for f in ("Dockerfile", "env.py", "serve.py"):
        h.update((HUD_FIXTURE / f).read_bytes())
    h.update((HUD_PY.parent.parent / ".req-stamp").read_bytes())
    return "denv-test/hud-letter-count:" + h.hexdigest()[:12]


def hud_image() -> str:
    """Build HUD's reference environment FROM the Debian fixture, with the hud
    venv's site-packages in the context, unless the image exists; then check
    that the image's python3 imports hud (compiled modules load only under the
    Python they were built for)."""
    image = HUD_IMAGE or hud_image_tag()
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0:
        return image
    site = next((HUD_PY.parent.parent / "lib").glob("python3.*/site-packages"))
    with tempfile.TemporaryDirectory() as ctx:
        for f in ("Dockerfile", "env.py", "serve.py"):
            shutil.copy2(HUD_FIXTURE / f, Path(ctx) / f)
        shutil.copytree(site, Path(ctx) / "site-packages", symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "pip", "pip-*"))
        r = subprocess.run(["docker", "build", "-q", "-t", image, ctx], capture_output=True, text=True,
                           timeout=900)
        assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run(["docker", "run", "--rm", image, "python3", "-c", "import hud"], capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        subprocess.run(["docker", "rmi", image], capture_output=True)
        raise AssertionError(f"the HUD image's python3 cannot import hud ({site.parent.name} packages): "
                             f"{r.stderr.strip().splitlines()[-1:]}")
    return image


def check_hud(b: Backend) -> None:
    def run() -> None:
        b.sandboxes_usable()
        if not HUD_PY.is_file():
            raise Skip("python/.venv-hud (Python 3.11 with hud 0.6) is missing: t/deps.sh makes it")
        image = hud_image()
        env = dict(harbor_env(), HUD_TELEMETRY_ENABLED="false", HUD_API_KEY="")
        r = subprocess.run([str(HUD_PY), str(HERE / "hud_check.py"), image, str(HUD_FIXTURE / "env.py")],
                           capture_output=True, text=True, timeout=900, env=env)
        assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        assert doc["rewards"] == [1.0], doc
        assert len(doc["environments"]) == 1 and doc["statuses"] == ["destroyed"], doc
        st["doc"] = doc

    def version() -> None:
        if "doc" not in st:
            raise Skip("the image rollout failed")
        doc = st["doc"]
        assert doc["version_rewards"] == [1.0], doc
        assert doc["version_parents"] == [doc["version"]], doc  # the rollout forked the version
        assert doc["fork_parent_env"] is True, doc
        assert doc["grade"] == {"reward": 1.0, "source": "reward.txt"}, doc

    st: dict[str, Any] = {}
    T.run("hud: HUD's letter-count task through Task.run with DenvRuntime and HUD's OpenAI agent "
          "on a mock model: reward 1, environment destroyed", run)
    T.run("hud: DenvRuntime.from_denv_version forks the version per rollout (reward 1); fork() and "
          "grade() (denv verify) on the running rollout", version)


def main(argv: list[str]) -> int:
    wanted = argv or CHECKS
    unknown = [w for w in wanted if w not in CHECKS + EXTRA_CHECKS]
    if unknown:
        print(f"conformance: unknown check(s) {unknown}; known: {' '.join(CHECKS)}", file=sys.stderr)
        return 2
    try:
        b = Backend()
    except Exception as e:
        print(f"Bail out! cannot reach the control plane: {e}")
        return 1
    print(f"# control plane {b.c.server}, connected sidecars: {b.hosts}")
    counts: list[tuple[str, int, int, int]] = []
    for name in wanted:
        n0, f0, s0 = T.n, len(T.failed), len(T.skipped)
        globals()[f"check_{name}"](b)
        counts.append((name, T.n - n0, len(T.failed) - f0, len(T.skipped) - s0))
    print(f"1..{T.n}")
    for name, n, failed, skipped in counts:  # one line per framework (make e2e-frameworks)
        print(f"# {name}: {n - failed - skipped} passed, {failed} failed, {skipped} skipped")
    if T.skipped:
        print(f"# SKIPPED {len(T.skipped)}:")
        for s in T.skipped:
            print(f"#   {s}")
    if T.failed:
        print(f"# FAILED {len(T.failed)}: {', '.join(T.failed)}")
        return 1
    print(f"# conformance: {T.n - len(T.skipped)} passed, {len(T.skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
