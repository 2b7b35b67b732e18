"""The Prime Intellect fake (t/fakes/fake_prime.py) against Prime's own
client (PyPI `prime-sandboxes`), as test_sdks.py does for E2B and Daytona:
the SDK makes the calls denv-cp makes, at connect (src/cp/token_check.c)
and in the driver (src/cp/driver_prime.c): list with the key (and a wrong
key raising its UnauthorizedError), create from an image and wait for it
(the SDK's batch status route and its reachability command), run a command
through the gateway's Connect stream in the SDK's binary protobuf codec,
upload and download a file, checkpoint and wait for it, a new sandbox from
the checkpoint, delete both. Prints TAP; run by t/integ/fakes-sdk-prime.sh.
Loopback only.
"""
import os
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tap  # noqa: E402
from tap import ok, skip  # noqa: E402
from test_sdks import docker_ok, raised  # noqa: E402

IMAGE = "denv-test/debian:latest"
NAMES = ("prime: list", "prime: same call as denv-cp", "prime: a wrong key", "prime: create and wait",
         "prime: execute_command", "prime: binary codec", "prime: JSON codec", "prime: upload_bytes", "prime: download_file", "prime: read_file",
         "prime: checkpoint", "prime: create from the checkpoint", "prime: delete")


def client(url, key):
    """A SandboxClient on the fake; the SDK reads its base URL from the environment."""
    from prime_sandboxes import APIClient, SandboxClient
    os.environ["PRIME_API_BASE_URL"] = url
    return SandboxClient(APIClient(api_key=key))


def json_codec_run(c, sid):
    """One command through the gateway by connectrpc with its JSON codec, the
    SDK's own request, method and auth otherwise: (stdout, exit code)."""
    from connectrpc.client import ConnectClientSync
    from connectrpc.compat import google_protobuf_json_codec
    from prime_sandboxes.rpc_command_session import (COMMAND_SESSION_START_RPC_METHOD,
                                                     build_command_session_start_request)
    auth = c._auth_cache.get_or_refresh(sid)  # the SDK's own POST /sandbox/{id}/auth
    rpc = ConnectClientSync("%s/%s/%s" % (auth["gateway_url"], auth["user_ns"], auth["job_id"]),
                            codec=google_protobuf_json_codec(), send_compression=None)
    out, code = b"", None
    try:
        for ev in rpc.execute_server_stream(request=build_command_session_start_request(
                command="echo json", working_dir=None, env=None), method=COMMAND_SESSION_START_RPC_METHOD,
                headers={"Authorization": "Bearer " + auth["token"]}, timeout_ms=60000):
            which = ev.event.WhichOneof("event")
            if which == "data":
                out += ev.event.data.stdout
            elif which == "end":
                code = ev.event.end.exit_code
    finally:
        rpc.close()
    return out, code


def test_prime(f):
    from importlib.metadata import version
    from prime_sandboxes import CreateSandboxRequest, UnauthorizedError

    c = client(f.url, f.key)
    f.sandboxes = []
    got = c.list(per_page=1)
    ok(got.sandboxes == [] and got.total == 0, "prime-sandboxes %s: list(per_page=1) accepts the fake's answer"
       % version("prime-sandboxes"), got)
    r = f.requests[-1]
    ok((r["method"], r["path"], r["headers"].get("authorization")) ==
       ("GET", "/api/v1/sandbox?page=1&per_page=1", "Bearer " + f.key),
       "prime: it is the call denv-cp makes (GET /api/v1/sandbox?page=1&per_page=1, bearer key)", r)
    ex = raised(lambda: client(f.url, "pit_wrong").list(per_page=1))
    ok(isinstance(ex, UnauthorizedError), "prime: a wrong key raises UnauthorizedError", repr(ex))

    sb = c.create(CreateSandboxRequest(name="denv-sdk", docker_image=IMAGE, labels=["denv"]))
    c.wait_for_creation(sb.id)
    ok(f.live[sb.id]["status"] == "RUNNING" and any(r["path"] == "/api/v1/sandbox/%s/auth" % sb.id
                                                      for r in f.requests),
       "prime: create, then wait_for_creation (status batch, gateway auth, a reachability command)", sb.id)
    r = c.execute_command(sb.id, "echo hi; echo err >&2; exit 3")
    ok((r.exit_code, r.stdout, r.stderr) == (3, "hi\n", "err\n"),
       "prime: execute_command reads the Connect stream in protobuf (stdout, stderr, exit code)", r)
    starts = [r for r in f.requests if r["path"].endswith("/command_session.CommandSession/Start")]
    ok(starts and starts[-1]["headers"].get("content-type") == "application/connect+proto",
       "prime: the SDK speaks the binary codec to the gateway", starts[-1]["headers"] if starts else None)
    ok(json_codec_run(c, sb.id) == (b"json\n", 0),
       "prime: the gateway answers the Connect JSON codec (denv-cp's) too, read by connectrpc's own codec")
    up = c.upload_bytes(sb.id, "/tmp/denv/x.bin", b"round trip\x00\xff\n", "x.bin")
    ok(up.success and up.path == "/tmp/denv/x.bin" and up.size == 13, "prime: upload_bytes (multipart \"file\")", up)
    with tempfile.TemporaryDirectory() as d:
        c.download_file(sb.id, "/tmp/denv/x.bin", os.path.join(d, "x.bin"))
        ok(open(os.path.join(d, "x.bin"), "rb").read() == b"round trip\x00\xff\n",
           "prime: download_file gives the bytes back")
    ok(c.read_file(sb.id, "/tmp/denv/x.bin").content.startswith("round trip"), "prime: read_file")
    ck = c.checkpoint(sb.id)
    ck = c.wait_for_checkpoint(ck.id, timeout_seconds=60)
    ok(ck.state == "DURABLE" and ck.sandbox_id == sb.id, "prime: checkpoint, waited until DURABLE", ck)
    sb2 = c.create(CreateSandboxRequest(name="denv-sdk-2", checkpoint_id=ck.id))
    c.wait_for_creation(sb2.id)
    ok(c.execute_command(sb2.id, "head -c 10 /tmp/denv/x.bin").stdout == "round trip",
       "prime: a sandbox created from the checkpoint has the file")
    c.delete(sb.id)
    c.delete(sb2.id)
    ok(not f.live, "prime: delete removes both", list(f.live))


def main():
    try:
        import prime_sandboxes  # noqa: F401
        from fake_prime import FakePrime
    except ImportError:
        for t in NAMES:
            skip(t, "the prime-sandboxes SDK is not installed (t/requirements.txt)")
        return tap.finish()
    if not docker_ok():
        for t in NAMES:
            skip(t, "the fake's sandboxes need Docker and %s" % IMAGE)
        return tap.finish()
    home = tempfile.mkdtemp(prefix="denv-prime-sdk-")
    os.environ["HOME"] = home   # the SDK keeps its gateway-auth cache under ~/.prime
    os.environ.pop("PRIME_CONTEXT", None)
    os.environ.pop("PRIME_TEAM_ID", None)
    f = FakePrime()
    try:
        test_prime(f)
    except Exception:
        ok(False, "test_prime raised", traceback.format_exc())
    finally:
        f.stop()
    return tap.finish(home)


if __name__ == "__main__":
    sys.exit(main())
