"""Integration test of the Prime Intellect driver (src/cp/driver_prime.c)
through denv-cp's API against the fake t/fakes/fake_prime.py, whose
sandboxes are Docker containers of a local image and which prime-sandboxes
itself accepts (t/fakes/test_sdk_prime.py): a wrong key is refused at
connect, a sandbox placed on the target runs a command over the gateway's
Connect stream and round-trips a file, is checkpointed and forked into a new
sandbox restored from the checkpoint, refuses verify with the words of
targets.md, and is destroyed. Prints TAP; run by t/integ/cp-prime.sh.
Loopback only.
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fakes"))
import drv_harness as D  # noqa: E402
from drv_harness import settled, tar_of, untar  # noqa: E402
from cp_harness import BOOT_KEY, err_of  # noqa: E402
from tap import ok, is_  # noqa: E402
from fake_prime import FakePrime  # noqa: E402

KEY = "pit_driver_test_0123456789"
IMAGE = "denv-test/debian:latest"


def exec_(s, env, cmd):
    return s.call("POST", "/v1/envs/%s/exec" % env, key=BOOT_KEY, body={"service": "main", "cmd": cmd})


def connect(s, f):
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "prime", "token": "pit_wrong"})
    is_((st, err_of(doc)), (400, "prime: token refused (401 Unauthorized: Invalid API key)"),
        "a wrong key: 400 naming prime and its answer")
    ok(f.requests[-1]["path"] == "/api/v1/sandbox?page=1&per_page=1",
       "the check is the SDK's list call (GET /api/v1/sandbox?page=1&per_page=1)", f.requests[-1]["path"])
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "prime", "token": KEY})
    ok(st == 201 and doc["info"]["token_checked"] is True, "connect a prime target (token checked)", (st, doc))
    st, doc, _ = s.call("GET", "/v1/targets", key=BOOT_KEY)
    rows = [t for t in (doc if isinstance(doc, list) else doc.get("targets", [])) if t.get("provider") == "prime"]
    ok(rows and rows[0]["table"]["fork"] == "new sandbox from snapshot" and rows[0]["table"]["caps"] == "per sandbox",
       "GET /v1/targets lists it with Prime's capability row", rows)


def sandbox(s, f):
    st, doc, _ = s.call("POST", "/v1/sandboxes", key=BOOT_KEY,
                        body={"image": IMAGE, "cmd": ["sh", "-c", "echo started > /tmp/started; exec sleep 1000"],
                              "env": {"GREETING": "hello there"}, "timeout_sec": 60})
    ok(st == 201, "POST /v1/sandboxes with the prime target only: 201", (st, doc))
    env = doc["environment"]["ID"]
    creates = [r for r in f.requests if r["method"] == "POST" and r["path"] == "/api/v1/sandbox"]
    ok(len(creates) == 1 and creates[0]["body"]["docker_image"] == IMAGE and creates[0]["body"]["vm"] is True and
       creates[0]["body"]["network_allowlist"] == [] and env in creates[0]["body"]["labels"] and
       creates[0]["headers"].get("authorization") == "Bearer " + KEY,
       "placed on prime: POST /api/v1/sandbox with the image, egress denied (empty allowlist), the bearer key",
       creates)
    sid = next(iter(f.live))
    ok(any(r["method"] == "GET" and r["path"] == "/api/v1/sandbox/" + sid for r in f.requests),
       "it waited for the sandbox to run (GET /api/v1/sandbox/{id})")
    st, doc, _ = exec_(s, env, ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do [ -f /tmp/started ] && break; "
                                "sleep 0.3; done; cat /tmp/started"])
    is_((st, (doc or {}).get("stdout")), (200, "started\n"), "the sandbox's cmd was started in the background")
    st, doc, _ = exec_(s, env, ["sh", "-c", "echo out; echo err >&2; echo \"$GREETING\"; exit 7"])
    is_((st, doc), (200, {"exit_code": 7, "stdout": "out\nhello there\n", "stderr": "err\n"}),
        "exec over the gateway: exit code, stdout and stderr apart, the sandbox's env")
    starts = [r for r in f.requests if r["path"].endswith("/command_session.CommandSession/Start")]
    ok(starts and starts[-1]["headers"].get("content-type") == "application/connect+json" and
       starts[-1]["headers"].get("authorization") == "Bearer " + f.live[sid]["token"],
       "a Connect stream in the JSON codec, with the gateway's token from /auth (not the key)",
       starts[-1]["headers"] if starts else None)
    st, doc, _ = exec_(s, env, ["printf", "%s|", "it's", "a b", "$HOME"])
    is_((st, (doc or {}).get("stdout")), (200, "it's|a b|$HOME|"), "each argument reaches the command as it is")
    data = b"round trip \x00\xff\n" * 100
    st, doc, _ = s.call("PUT", "/v1/envs/%s/files?service=main&path=/work/in" % env, key=BOOT_KEY,
                        headers={"Content-Type": "application/x-tar"}, raw=tar_of("a.bin", data))
    ok(st == 200, "put a file (a tar of one)", (st, doc))
    ups = [r for r in f.requests if "/upload?" in r["path"]]
    ok(ups and ups[-1]["path"] == "/gw/ns-fake/%s/upload?path=/work/in/a.bin&sandbox_id=%s" % (sid, sid),
       "it went to the gateway's upload route, multipart", [r["path"] for r in ups])
    st, doc, _ = exec_(s, env, ["wc", "-c", "/work/in/a.bin"])
    is_((st, (doc or {}).get("stdout")), (200, "%d /work/in/a.bin\n" % len(data)), "the command sees it")
    st, raw, _ = s.call("GET", "/v1/envs/%s/files?service=main&path=/work/in/a.bin" % env, key=BOOT_KEY)
    ok(st == 200 and untar(raw) == {"a.bin": data}, "get it back: a tar of the same bytes", (st, raw[:200]))
    st, doc, _ = s.call("GET", "/v1/envs/%s/files?service=main&path=/work/none" % env, key=BOOT_KEY)
    ok(st == 502 and "prime: env.get: Prime answered 404 Not Found: File not found: /work/none"
       in (err_of(doc) or ""), "a missing path: 502 with Prime's answer", (st, doc))
    return env, sid


def snapshot_fork(s, f, env):
    st, doc, _ = s.call("POST", "/v1/envs/%s/snapshot" % env, key=BOOT_KEY, body={"name": "s1"})
    d = settled(s, st, doc)
    ok(st in (200, 201, 202) and d["deployment"]["Status"] == "succeeded", "snapshot succeeds", (st, d))
    cks = [r for r in f.requests if r["method"] == "POST" and r["path"].endswith("/checkpoints")]
    # the sandbox's first version was checkpointed at create, as every environment's is
    ok(len(cks) == 2 and len(f.checkpoints) == 2 and all(c["state"] == "DURABLE" for c in f.checkpoints.values()),
       "POST /api/v1/sandbox/{id}/checkpoints, waited until DURABLE", (cks, f.checkpoints))
    st, doc, _ = s.call("POST", "/v1/envs/%s/fork" % env, key=BOOT_KEY, body={"name": "f1"})
    d = settled(s, st, doc)
    ok(st in (200, 201, 202) and d["deployment"]["Status"] == "succeeded", "fork succeeds", (st, d))
    fork = d["deployment"]["EnvID"]
    creates = [r for r in f.requests if r["method"] == "POST" and r["path"] == "/api/v1/sandbox"]
    ok(creates[-1]["body"].get("checkpoint_id") in f.checkpoints and "docker_image" not in creates[-1]["body"],
       "the fork is a new sandbox restored from a checkpoint (POST /api/v1/sandbox {checkpoint_id})",
       creates[-1]["body"])
    st, doc, _ = exec_(s, fork, ["head", "-c", "10", "/work/in/a.bin"])
    is_((st, (doc or {}).get("stdout")), (200, "round trip"), "the fork has the file")
    exec_(s, fork, ["sh", "-c", "echo changed > /work/in/a.bin"])
    st, doc, _ = exec_(s, env, ["head", "-c", "10", "/work/in/a.bin"])
    is_((st, (doc or {}).get("stdout")), (200, "round trip"), "a change in the fork leaves the source alone")
    return fork


def refusals(s, f, env):
    st, doc, _ = s.call("POST", "/v1/envs/%s/verify" % env, key=BOOT_KEY, body={})
    body = settled(s, st, doc, timeout=30)
    is_((st, err_of(body)), (400, "prime: verify.collect: not supported on prime yet"),
        "verify: 400, not supported on prime (the table's Verify: no)")
    st, doc, _ = s.call("POST", "/v1/sandboxes", key=BOOT_KEY, body={"image": "nosuch/image:1", "timeout_sec": 60})
    ok(st == 502 and "prime: env.create: Prime answered 400 Bad Request: Image nosuch/image:1 could not be pulled"
       in (err_of(doc) or ""), "an image Prime cannot pull: 502 with Prime's answer", (st, doc))
    f.start_error = "no capacity in region us-east"
    st, doc, _ = s.call("POST", "/v1/sandboxes", key=BOOT_KEY, body={"image": IMAGE, "timeout_sec": 60})
    f.start_error = None
    ok(st == 502 and "prime: env.create: sandbox " in (err_of(doc) or "") and
       (err_of(doc) or "").endswith(" is ERROR (SANDBOX_START_FAILED): no capacity in region us-east"),
       "a sandbox that ends in ERROR while starting: 502 with Prime's reason", (st, doc))


TWO = """services:
  a:
    image: denv-test/debian:latest
  b:
    image: denv-test/debian:latest
"""


def two_services(s):
    s.call("POST", "/v1/projects", key=BOOT_KEY, body={"name": "two"})
    st, doc, _ = s.call("POST", "/v1/projects/two/deploy", key=BOOT_KEY, body={"compose": TWO})
    d = settled(s, st, doc, timeout=30)
    ok("prepare" in str(d) and "prime runs one container per environment; use your machines for multi-service "
       "stacks (2 services declared)" in str(d), "two services on prime: refused at prepare", (st, d))


def destroy(s, f, env, sid):
    st, doc, _ = s.call("DELETE", "/v1/envs/%s" % env, key=BOOT_KEY)
    d = settled(s, st, doc)
    ok(st == 202 and d["deployment"]["Status"] == "succeeded", "destroy: the deployment succeeds", (st, d))
    ok(any(r["method"] == "DELETE" and r["path"] == "/api/v1/sandbox/" + sid for r in f.requests) and
       sid not in f.live, "DELETE /api/v1/sandbox/{id}: the sandbox is gone", list(f.live))


def by_cli(s, f, env):
    """The verbs that exist for it: connect, exec, files."""
    if not os.access(D.CLI, os.X_OK):
        ok(True, "# SKIP bin/denv is not built")
        return
    rc, out, err = D.cli(s, "cloud", "connect", "prime", "--name", "pr-cli", "--token", "pit_wrong")
    ok(rc == 1 and "prime: token refused (401 Unauthorized: Invalid API key)" in err,
       "denv cloud connect prime with a wrong token: exit 1 with Prime's answer", (rc, out, err))
    rc, out, err = D.cli(s, "exec", "--service", "main", env, "--", "sh", "-c", "echo cli; exit 3")
    is_((rc, out), (3, "cli\n"), "denv exec on the Prime sandbox: its output and exit code")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "c.txt")
        with open(src, "w") as fh:
            fh.write("by the cli\n")
        rc, out, err = D.cli(s, "files", "put", "--service", "main", env, src, "/work/in")
        ok(rc == 0, "denv files put into a directory (docker cp's rules: inside it)", (rc, out, err))
        rc, out, err = D.cli(s, "files", "get", "--service", "main", env, "/work/in/c.txt", os.path.join(d, "back"))
        got = open(os.path.join(d, "back", "c.txt")).read() if rc == 0 else None
        is_(got, "by the cli\n", "denv files get brings it back")


def run(s, f):
    connect(s, f)
    env, sid = sandbox(s, f)
    by_cli(s, f, env)
    fork = snapshot_fork(s, f, env)
    refusals(s, f, env)
    two_services(s)
    destroy(s, f, env, sid)
    fork_sid = next(k for k, v in f.live.items() if fork in v["labels"])
    destroy(s, f, fork, fork_sid)


def main():
    f = FakePrime(key=KEY)
    return D.main("prime", IMAGE, f, {"DENV_PRIME_API_URL": f.url + "/api/v1"}, run,
                  lambda f: [KEY] + [r["headers"]["authorization"][len("Bearer "):] for r in f.requests
                                     if r["path"].startswith("/gw/") and r["headers"].get("authorization")])


if __name__ == "__main__":
    sys.exit(main())
