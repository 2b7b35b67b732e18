"""Integration test of the Daytona driver (src/cp/driver_daytona.c) through
denv-cp's API against the fake t/fakes/fake_daytona.py, whose sandboxes are
Docker containers of a local image and which the daytona SDK itself accepts
(t/fakes/test_sdks.py): a wrong key is refused at connect, a sandbox placed
on the target runs a command and round-trips a file, is snapshotted and
forked into a new sandbox from that snapshot, refuses verify with the words
of targets.md, and is destroyed. Prints TAP; run by t/integ/cp-daytona.sh.
Loopback only.
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fakes"))
import cp_harness as T  # noqa: E402  (Server, store seeding)
import drv_harness as D  # noqa: E402
from drv_harness import settled, tar_of, untar  # noqa: E402
from cp_harness import BOOT_KEY, err_of  # noqa: E402
from tap import ok, is_  # noqa: E402
from fake_daytona import FakeDaytona  # noqa: E402

KEY = "dtn_driver_test_0123456789"
IMAGE = "denv-test/debian:latest"
TWO = """services:
  a:
    image: denv-test/debian:latest
  b:
    image: denv-test/debian:latest
"""





def exec_(s, env, cmd):
    return s.call("POST", "/v1/envs/%s/exec" % env, key=BOOT_KEY, body={"service": "main", "cmd": cmd})


def by_cli(s, f, env):
    """The verbs that exist for it, on the same sandbox: connect, exec, files."""
    if not os.access(D.CLI, os.X_OK):
        ok(True, "# SKIP bin/denv is not built")
        return
    rc, out, err = D.cli(s, "cloud", "connect", "daytona", "--name", "dt-cli", "--token", "dtn_wrong")
    ok(rc == 1 and "daytona: token refused (401 Unauthorized: Invalid API key)" in err,
       "denv cloud connect daytona with a wrong token: exit 1 with Daytona's answer", (rc, out, err))
    rc, out, err = D.cli(s, "exec", "--service", "main", env, "--", "sh", "-c", "echo cli; exit 3")
    is_((rc, out), (3, "cli\n"), "denv exec on the Daytona sandbox: its output and exit code")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "c.txt")
        with open(src, "w") as fh:
            fh.write("by the cli\n")
        rc, out, err = D.cli(s, "files", "put", "--service", "main", env, src, "/work/in")
        ok(rc == 0, "denv files put into a directory (docker cp's rules: inside it)", (rc, out, err))
        rc, out, err = D.cli(s, "files", "get", "--service", "main", env, "/work/in/c.txt", os.path.join(d, "back"))
        got = open(os.path.join(d, "back", "c.txt")).read() if rc == 0 else None
        is_(got, "by the cli\n", "denv files get brings it back")
        rc, out, err = D.cli(s, "files", "put", "--service", "main", env, src, "/work/renamed.txt")
        st, doc, _ = exec_(s, env, ["cat", "/work/renamed.txt"])
        is_((rc, (doc or {}).get("stdout")), (0, "by the cli\n"), "onto a missing path: it becomes that path")
        rc, out, err = D.cli(s, "files", "put", "--service", "main", env, src, "/nowhere/x")
        ok(rc == 1 and "daytona: env.put: the parent directory of /nowhere/x does not exist" in err,
           "under a missing directory: refused as docker cp would", (rc, err))


def connect(s, f):
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY,
                        body={"provider": "daytona", "token": "dtn_wrong_key"})
    is_((st, err_of(doc)), (400, "daytona: token refused (401 Unauthorized: Invalid API key)"),
        "a wrong key: 400 naming daytona and its answer")
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "daytona", "token": KEY})
    ok(st == 201 and doc["info"]["token_checked"] is True, "connect a daytona target (token checked)", (st, doc))


def sandbox(s, f):
    st, doc, _ = s.call("POST", "/v1/sandboxes", key=BOOT_KEY,
                        body={"image": IMAGE, "cmd": ["sh", "-c", "echo started > /tmp/started; exec sleep 1000"],
                              "timeout_sec": 60})
    ok(st == 201, "POST /v1/sandboxes with the daytona target only: 201", (st, doc))
    env = doc["environment"]["ID"]
    creates = [r for r in f.requests if r["method"] == "POST" and r["path"] == "/api/sandbox"]
    ok(len(creates) == 1 and creates[0]["body"]["buildInfo"]["dockerfileContent"] == "FROM %s\n" % IMAGE and
       creates[0]["body"]["labels"] == {"denv_env": env} and
       creates[0]["headers"].get("authorization") == "Bearer " + KEY,
       "placed on daytona: POST /api/sandbox with a FROM Dockerfile, the bearer key", creates)
    sid = next(iter(f.live))
    ok(any(r["method"] == "GET" and r["path"] == "/api/sandbox/" + sid for r in f.requests),
       "it waited for the sandbox to be started (GET /api/sandbox/{id})")
    st, doc, _ = exec_(s, env, ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do [ -f /tmp/started ] && break; "
                                "sleep 0.3; done; cat /tmp/started"])
    is_((st, (doc or {}).get("stdout")), (200, "started\n"), "the sandbox's cmd was started in the background")
    st, doc, _ = exec_(s, env, ["sh", "-c", "echo out; echo err >&2; exit 7"])
    is_((st, doc), (200, {"exit_code": 7, "stdout": "out\nerr\n", "stderr": ""}),
        "exec through the toolbox: exit code, the output as Daytona gives it (together)")
    st, doc, _ = exec_(s, env, ["printf", "%s|", "it's", "a b", "$HOME"])
    is_((st, (doc or {}).get("stdout")), (200, "it's|a b|$HOME|"), "each argument reaches the command as it is")
    data = b"round trip \x00\xff\n" * 100
    st, doc, _ = s.call("PUT", "/v1/envs/%s/files?service=main&path=/work/in" % env, key=BOOT_KEY,
                        headers={"Content-Type": "application/x-tar"}, raw=tar_of("a.bin", data))
    ok(st == 200, "put a file (a tar of one)", (st, doc))
    ups = [r for r in f.requests if "/files/upload-v2?" in r["path"]]
    ok(ups and ups[-1]["path"] == "/api/toolbox/%s/files/upload-v2?path=/work/in/a.bin" % sid,
       "it went to the sandbox's toolboxProxyUrl, multipart", [r["path"] for r in ups])
    st, doc, _ = exec_(s, env, ["wc", "-c", "/work/in/a.bin"])
    is_((st, (doc or {}).get("stdout")), (200, "%d /work/in/a.bin\n" % len(data)), "the command sees it")
    st, raw, _ = s.call("GET", "/v1/envs/%s/files?service=main&path=/work/in/a.bin" % env, key=BOOT_KEY)
    ok(st == 200 and untar(raw) == {"a.bin": data}, "get it back: a tar of the same bytes", (st, raw[:200]))
    st, doc, _ = s.call("GET", "/v1/envs/%s/files?service=main&path=/work/none" % env, key=BOOT_KEY)
    ok(st == 502 and "daytona: env.get: Daytona answered 404 Not Found: file not found: /work/none"
       in (err_of(doc) or ""), "a missing path: 502 with Daytona's answer", (st, doc))
    return env, sid


def snapshot_fork(s, f, env):
    st, doc, _ = s.call("POST", "/v1/envs/%s/snapshot" % env, key=BOOT_KEY, body={"name": "s1"})
    d = settled(s, st, doc)
    ok(st in (200, 201, 202) and d["deployment"]["Status"] == "succeeded", "snapshot succeeds", (st, d))
    snaps = [r["body"]["name"] for r in f.requests if r["path"].endswith("/snapshot") and r["method"] == "POST"]
    # the sandbox's first version was snapshotted at create, as every environment's is
    ok(len(snaps) == 2 and all(n.startswith("denv-%s-ver_" % env) and n in f.snapshots for n in snaps),
       "POST /api/sandbox/{id}/snapshot, named after the environment and the version", snaps)
    st, doc, _ = s.call("POST", "/v1/envs/%s/fork" % env, key=BOOT_KEY, body={"name": "f1"})
    d = settled(s, st, doc)
    ok(st in (200, 201, 202) and d["deployment"]["Status"] == "succeeded", "fork succeeds", (st, d))
    fork = d["deployment"]["EnvID"]
    creates = [r for r in f.requests if r["method"] == "POST" and r["path"] == "/api/sandbox"]
    ok(creates[-1]["body"].get("snapshot") == snaps[-1] and "buildInfo" not in creates[-1]["body"],
       "the fork is a new sandbox from that snapshot (POST /api/sandbox {snapshot})", creates[-1]["body"])
    st, doc, _ = exec_(s, fork, ["head", "-c", "10", "/work/in/a.bin"])
    is_((st, (doc or {}).get("stdout")), (200, "round trip"), "the fork has the file")
    st, doc, _ = exec_(s, fork, ["sh", "-c", "echo changed > /work/in/a.bin"])
    st, doc, _ = exec_(s, env, ["head", "-c", "10", "/work/in/a.bin"])
    is_((st, (doc or {}).get("stdout")), (200, "round trip"), "a change in the fork leaves the source alone")
    return fork


def refusals(s, f, env):
    st, doc, _ = s.call("POST", "/v1/envs/%s/verify" % env, key=BOOT_KEY, body={})
    body = settled(s, st, doc, timeout=30)
    is_((st, err_of(body)), (400, "daytona: verify.collect: not supported on daytona yet"),
        "verify: 400, not supported on daytona (the table's Verify: no)")
    st, doc, _ = s.call("POST", "/v1/sandboxes", key=BOOT_KEY, body={"image": "nosuch/image:1", "timeout_sec": 60})
    ok(st == 502 and "daytona: env.create: Daytona answered 400 Bad Request: Failed to pull image nosuch/image:1"
       in (err_of(doc) or ""), "an image Daytona cannot pull: 502 with Daytona's answer", (st, doc))
    f.start_error = "no capacity in region us"
    st, doc, _ = s.call("POST", "/v1/sandboxes", key=BOOT_KEY, body={"image": IMAGE, "timeout_sec": 60})
    f.start_error = None
    ok(st == 502 and "daytona: env.create: sandbox " in (err_of(doc) or "") and
       (err_of(doc) or "").endswith(" is error: no capacity in region us"),
       "a sandbox that ends in error while starting: 502 with Daytona's reason", (st, doc))
    s.call("POST", "/v1/projects", key=BOOT_KEY, body={"name": "two"})
    st, doc, _ = s.call("POST", "/v1/projects/two/deploy", key=BOOT_KEY, body={"compose": TWO})
    d = settled(s, st, doc, timeout=30)
    ok("prepare" in str(d) and "runs one container per environment; use your machines for multi-service "
       "stacks (2 services declared)" in str(d), "two services on daytona: refused at prepare", (st, d))


def destroy(s, f, env, sid):
    st, doc, _ = s.call("DELETE", "/v1/envs/%s" % env, key=BOOT_KEY)
    d = settled(s, st, doc)
    ok(st == 202 and d["deployment"]["Status"] == "succeeded", "destroy: the deployment succeeds", (st, d))
    ok(any(r["method"] == "DELETE" and r["path"] == "/api/sandbox/" + sid for r in f.requests) and sid not in f.live,
       "DELETE /api/sandbox/{id}: the sandbox is gone", list(f.live))


def run(s, f):
    connect(s, f)
    env, sid = sandbox(s, f)
    by_cli(s, f, env)
    fork = snapshot_fork(s, f, env)
    refusals(s, f, env)
    destroy(s, f, env, sid)
    fork_sid = next(k for k, v in f.live.items() if v["labels"].get("denv_env") == fork)
    destroy(s, f, fork, fork_sid)



def main():
    f = FakeDaytona(key=KEY)
    return D.main("daytona", IMAGE, f, {"DENV_DAYTONA_API_URL": f.url}, run, lambda f: [KEY])


if __name__ == "__main__":
    sys.exit(main())
