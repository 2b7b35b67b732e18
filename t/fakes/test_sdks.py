"""Each provider fake against the provider's own SDK (PyPI `e2b`, `daytona`):
the SDK makes the calls denv-cp makes, at connect (src/cp/token_check.c) and
in the drivers (src/cp/driver_e2b.c, driver_daytona.c), and
accepts the fake's answer with the fake's key, and raises its own
authentication error with a wrong one. This is what keeps the fakes' routes,
headers and error bodies the real ones. Prints TAP; run by
t/integ/fakes-sdk.sh. Loopback only.
"""
import os
import sys
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tap  # noqa: E402
from tap import ok, skip  # noqa: E402
from fake_e2b import FakeE2B  # noqa: E402
from fake_daytona import FakeDaytona  # noqa: E402

def raised(fn):
    try:
        fn()
    except Exception as ex:  # the SDK's own class is checked by the caller
        return ex
    return None


def test_e2b():
    try:
        import e2b
    except ImportError:
        for t in ("e2b: list", "e2b: same call as denv-cp", "e2b: a wrong key"):
            skip(t, "the e2b SDK is not installed (t/requirements.txt)")
        return
    f = FakeE2B()
    try:
        f.sandboxes = [FakeE2B.sandbox("sbx-one"), FakeE2B.sandbox("sbx-two")]
        got = e2b.Sandbox.list(limit=1, api_key=f.key, api_url=f.url).next_items()
        ok([s.sandbox_id for s in got] == ["sbx-one"], "e2b %s: Sandbox.list(limit=1) accepts the fake's answer"
           % e2b_version(), got)
        r = f.requests[-1]
        ok((r["method"], r["path"], r["headers"].get("x-api-key")) == ("GET", "/v2/sandboxes?limit=1", f.key),
           "e2b: it is the call denv-cp makes (GET /v2/sandboxes?limit=1, X-API-KEY)", r)
        ex = raised(lambda: e2b.Sandbox.list(limit=1, api_key="e2b_wrong", api_url=f.url).next_items())
        ok(isinstance(ex, e2b.AuthenticationException) and "Invalid API key" in str(ex),
           "e2b: a wrong key raises AuthenticationException with the fake's message", repr(ex))
    finally:
        f.stop()


def docker_ok():
    import subprocess
    try:
        return subprocess.run(["docker", "image", "inspect", "denv-test/debian:latest"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_e2b_sandbox():
    """The calls denv-cp's E2B driver makes (src/cp/driver_e2b.c), by the SDK:
    create from a template, run a command, write and read a file, pause and
    resume, kill. The envd calls go to the fake through E2B_SANDBOX_URL."""
    names = ("e2b: Sandbox.create", "e2b: commands.run", "e2b: a failing command", "e2b: files.write",
             "e2b: files.read", "e2b: pause", "e2b: resume", "e2b: kill")
    try:
        import e2b
    except ImportError:
        for t in names:
            skip(t, "the e2b SDK is not installed (t/requirements.txt)")
        return
    if not docker_ok():
        for t in names:
            skip(t, "the fake's sandboxes need Docker and denv-test/debian:latest")
        return
    f = FakeE2B()
    os.environ["E2B_SANDBOX_URL"] = f.url
    try:
        sbx = e2b.Sandbox.create("base", api_key=f.key, api_url=f.url, sandbox_url=f.url)
        ok(sbx.sandbox_id in f.live, "e2b: Sandbox.create('base') accepts the fake's sandbox", sbx.sandbox_id)
        r = sbx.commands.run("echo hi; echo err >&2")
        ok((r.exit_code, r.stdout, r.stderr) == (0, "hi\n", "err\n"),
           "e2b: commands.run reads the Connect stream (stdout, stderr, exit 0)", r)
        ex = raised(lambda: sbx.commands.run("exit 3"))
        ok(isinstance(ex, e2b.CommandExitException) and ex.exit_code == 3,
           "e2b: a failing command raises CommandExitException with its exit code", repr(ex))
        w = sbx.files.write("/tmp/denv/x.txt", b"round trip\n", use_octet_stream=True)
        ok(w.path == "/tmp/denv/x.txt", "e2b: files.write (octet-stream, as denv-cp sends) is accepted", w)
        ok(sbx.files.read("/tmp/denv/x.txt") == "round trip\n", "e2b: files.read gives the bytes back")
        sbx.pause()
        ok(f.live[sbx.sandbox_id]["state"] == "paused", "e2b: pause")
        sbx2 = e2b.Sandbox.connect(sbx.sandbox_id, api_key=f.key, api_url=f.url, sandbox_url=f.url)
        ok(sbx2.commands.run("cat /tmp/denv/x.txt").stdout == "round trip\n",
           "e2b: Sandbox.connect resumes it with its files")
        sbx2.kill()
        ok(sbx.sandbox_id not in f.live, "e2b: kill removes it")
    finally:
        os.environ.pop("E2B_SANDBOX_URL", None)
        f.stop()


def e2b_version():
    from importlib.metadata import version
    return version("e2b")


def test_daytona():
    try:
        import daytona
        from daytona.common.errors import DaytonaAuthenticationError
    except ImportError:
        for t in ("daytona: list", "daytona: same call as denv-cp", "daytona: a wrong key"):
            skip(t, "the daytona SDK is not installed (t/requirements.txt)")
        return
    from importlib.metadata import version
    f = FakeDaytona()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = daytona.Daytona(daytona.DaytonaConfig(api_key=f.key, api_url=f.url))
            got = list(c.list(daytona.ListSandboxesQuery(limit=1)))
        ok(got == [], "daytona %s: Daytona.list(limit=1) accepts the fake's answer" % version("daytona"), got)
        lists = [r for r in f.requests if r["path"].startswith("/api/sandbox?")]
        ok(lists and (lists[-1]["path"], lists[-1]["headers"].get("authorization"))
           == ("/api/sandbox?limit=1", "Bearer " + f.key),
           "daytona: it is the call denv-cp makes (GET /api/sandbox?limit=1, bearer key)", f.requests)

        def bad():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                d = daytona.Daytona(daytona.DaytonaConfig(api_key="dtn_wrong", api_url=f.url))
                return list(d.list(daytona.ListSandboxesQuery(limit=1)))
        ex = raised(bad)
        ok(isinstance(ex, DaytonaAuthenticationError) and "Invalid API key" in str(ex),
           "daytona: a wrong key raises DaytonaAuthenticationError with the fake's message", repr(ex))
    finally:
        f.stop()


def test_daytona_sandbox():
    """The calls denv-cp's Daytona driver makes (src/cp/driver_daytona.c), by
    the SDK: create from an image (a one-line Dockerfile) and wait for
    started, run a command, write and read a file through the toolbox's own
    generated client, snapshot the sandbox, a new sandbox from the snapshot,
    delete both."""
    names = ("daytona: create from an image", "daytona: process.exec", "daytona: upload_file",
             "daytona: download_file", "daytona: create_snapshot", "daytona: create from the snapshot",
             "daytona: delete")
    try:
        import daytona
    except ImportError:
        for t in names:
            skip(t, "the daytona SDK is not installed (t/requirements.txt)")
        return
    if not docker_ok():
        for t in names:
            skip(t, "the fake's sandboxes need Docker and denv-test/debian:latest")
        return
    f = FakeDaytona()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = daytona.Daytona(daytona.DaytonaConfig(api_key=f.key, api_url=f.url, use_deprecated_polling=True))
            sb = c.create(daytona.CreateSandboxFromImageParams(image="denv-test/debian:latest"), timeout=60)
        create = next(r for r in f.requests if r["method"] == "POST" and r["path"] == "/api/sandbox")
        ok(sb.id in f.live and str(sb.state.value) == "started" and
           create["body"]["buildInfo"]["dockerfileContent"].startswith("FROM denv-test/debian:latest"),
           "daytona: create(image=...) sends a FROM Dockerfile and waits for started", (sb.id, create["body"]))
        r = sb.process.exec("echo hi; echo err >&2; exit 3")
        ok((r.exit_code, r.result) == (3, "hi\nerr\n"),
           "daytona: process.exec reads {exitCode, result} (output together)", r)
        fs = sb.fs._api_client  # the toolbox's generated FileSystemApi, the routes denv-cp calls
        up = fs.upload_file(path="/tmp/denv/x.bin", file=("x.bin", b"round trip\x00\xff\n"))
        ok(up.path == "/tmp/denv/x.bin", "daytona: upload_file (multipart part \"file\") is accepted", up)
        got = bytes(fs.download_file(path="/tmp/denv/x.bin"))
        ok(got == b"round trip\x00\xff\n", "daytona: download_file gives the bytes back", got)
        sb.create_snapshot("denv-sdk-snap")
        ok("denv-sdk-snap" in f.snapshots and str(f.live[sb.id]["state"]) == "started",
           "daytona: create_snapshot, waited out of snapshotting", f.snapshots)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sb2 = c.create(daytona.CreateSandboxFromSnapshotParams(snapshot="denv-sdk-snap"), timeout=60)
        ok(sb2.process.exec("head -c 10 /tmp/denv/x.bin").result == "round trip",
           "daytona: a sandbox created from the snapshot has the file")
        sb.delete()
        sb2.delete()
        ok(not f.live, "daytona: delete removes both", f.live)
    finally:
        f.stop()


def main():
    for t in (test_e2b, test_e2b_sandbox, test_daytona, test_daytona_sandbox):
        try:
            t()
        except Exception:
            ok(False, "%s raised" % t.__name__, traceback.format_exc())
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
