"""Integration test of the E2B driver (src/cp/driver_e2b.c) through denv-cp's
API against the fake t/fakes/fake_e2b.py, whose sandboxes are Docker
containers of a local image and which the e2b SDK itself accepts
(t/fakes/test_sdks.py): connect an e2b target, a sandbox placed on it runs a
command and round-trips a file, pauses and resumes for a snapshot, refuses
fork and verify with the words of targets.md, and is destroyed. Prints TAP;
run by t/integ/cp-e2b.sh. Loopback only.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fakes"))
import cp_harness as T  # noqa: E402  (Server, store seeding)
import drv_harness as D  # noqa: E402
from drv_harness import settled, tar_of, untar  # noqa: E402
from cp_harness import BOOT_KEY, err_of  # noqa: E402
from tap import ok, is_  # noqa: E402
from fake_e2b import FakeE2B, envelope, STREAM  # noqa: E402

KEY = "e2b_driver_test_0123456789"
IMAGE = "denv-test/debian:latest"
TWO = """services:
  a:
    image: denv-test/debian:latest
  b:
    image: denv-test/debian:latest
"""
FORK = ("E2B has no fork: pause/resume continues the same sandbox and cannot branch it; use your machines or "
        "Daytona for forks")




def run(s, f):
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "e2b", "token": KEY})
    ok(st == 201 and doc["info"]["token_checked"] is True, "connect an e2b target (token checked)", (st, doc))
    st, doc, _ = s.call("POST", "/v1/sandboxes", key=BOOT_KEY,
                        body={"image": IMAGE, "cmd": ["sh", "-c", "echo started > /tmp/started; exec sleep 1000"],
                              "timeout_sec": 60})
    ok(st == 201, "POST /v1/sandboxes with the e2b target only: 201", (st, doc))
    env = doc["environment"]["ID"]
    creates = [r for r in f.requests if r["method"] == "POST" and r["path"] == "/v2/sandboxes"]
    ok(len(creates) == 1 and creates[0]["body"]["templateID"] == IMAGE and
       creates[0]["headers"].get("x-api-key") == KEY, "placed on e2b: POST /v2/sandboxes with the image as templateID",
       creates)
    is_(len(f.live), 1, "the fake runs one sandbox")
    st, doc, _ = s.call("POST", "/v1/envs/%s/exec" % env, key=BOOT_KEY, body={"service": "main", "cmd": [
        "sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do [ -f /tmp/started ] && break; sleep 0.3; done; cat /tmp/started"]})
    is_((st, (doc or {}).get("stdout")), (200, "started\n"), "the sandbox's cmd was started in the background")
    st, doc, _ = s.call("POST", "/v1/envs/%s/exec" % env, key=BOOT_KEY,
                        body={"service": "main", "cmd": ["sh", "-c", "echo out; echo err >&2; exit 7"]})
    is_((st, doc), (200, {"exit_code": 7, "stdout": "out\n", "stderr": "err\n"}),
        "exec through envd's process Start: exit code, stdout and stderr")
    st, doc, _ = s.call("POST", "/v1/envs/%s/exec" % env, key=BOOT_KEY, body={"service": "main", "cmd": ["true"]})
    is_((st, doc.get("exit_code") if isinstance(doc, dict) else doc), (200, 0), "exit 0 (left out by proto3 JSON)")
    f.plan.append((200, envelope({"error": {"code": "deadline_exceeded", "message": "the command timed out"}}, 2),
                   STREAM))
    st, doc, _ = s.call("POST", "/v1/envs/%s/exec" % env, key=BOOT_KEY, body={"service": "main", "cmd": ["true"]})
    is_((st, err_of(doc)), (502, "e2b: env.exec: envd: deadline_exceeded: the command timed out"),
        "envd ending the stream with an error: 502 with its code and message")
    f.plan.append((200, envelope({"event": {"start": {"pid": 7}}}), STREAM))
    st, doc, _ = s.call("POST", "/v1/envs/%s/exec" % env, key=BOOT_KEY, body={"service": "main", "cmd": ["true"]})
    is_((st, err_of(doc)), (502, "e2b: env.exec: the process stream ended before the process did"),
        "a stream cut before the end event: 502 saying so")
    data = b"round trip \x00\xff\n" * 100
    st, doc, _ = s.call("PUT", "/v1/envs/%s/files?service=main&path=/work/in" % env, key=BOOT_KEY,
                        headers={"Content-Type": "application/x-tar"}, raw=tar_of("a.bin", data))
    ok(st == 200, "put a file (a tar of one)", (st, doc))
    st, doc, _ = s.call("POST", "/v1/envs/%s/exec" % env, key=BOOT_KEY,
                        body={"service": "main", "cmd": ["wc", "-c", "/work/in/a.bin"]})
    is_((st, (doc or {}).get("stdout")), (200, "%d /work/in/a.bin\n" % len(data)), "the command sees it")
    st, raw, h = s.call("GET", "/v1/envs/%s/files?service=main&path=/work/in/a.bin" % env, key=BOOT_KEY)
    ok(st == 200 and untar(raw) == {"a.bin": data}, "get it back: a tar of the same bytes", (st, raw[:200]))
    st, doc, _ = s.call("PUT", "/v1/envs/%s/files?service=main&target=/work/in/b.bin" % env, key=BOOT_KEY,
                        headers={"Content-Type": "application/x-tar"}, raw=tar_of("a.bin", b"renamed\n"))
    st2, doc2, _ = s.call("POST", "/v1/envs/%s/exec" % env, key=BOOT_KEY,
                          body={"service": "main", "cmd": ["cat", "/work/in/b.bin"]})
    is_((st, st2, (doc2 or {}).get("stdout")), (200, 200, "renamed\n"),
        "put by target onto a missing path (docker cp's rules): the file becomes it")
    st, doc, _ = s.call("PUT", "/v1/envs/%s/files?service=main&target=/nowhere/x" % env, key=BOOT_KEY,
                        headers={"Content-Type": "application/x-tar"}, raw=tar_of("a.bin", b"x"))
    ok(st == 502 and "e2b: env.put: the parent directory of /nowhere/x does not exist" in (err_of(doc) or ""),
       "put by target under a missing directory: refused as docker cp would", (st, doc))
    st, doc, _ = s.call("GET", "/v1/envs/%s/files?service=main&path=/work/none" % env, key=BOOT_KEY)
    ok(st == 502 and "e2b: env.get: E2B answered 404 Not Found: path '/work/none' does not exist" in (err_of(doc) or ""),
       "a missing path: 502 with E2B's answer", (st, doc))
    st, doc, _ = s.call("POST", "/v1/envs/%s/snapshot" % env, key=BOOT_KEY, body={"name": "s1"})
    ok(st in (200, 201, 202), "snapshot: accepted", (st, doc))
    dep = (doc or {}).get("deployment", {})
    dep_id = dep.get("ID") if isinstance(dep, dict) else dep
    if dep_id:
        d = T.wait_deployment(s, dep_id, timeout=60)
        ok(d["deployment"]["Status"] == "succeeded", "snapshot succeeds by pause and resume", d["deployment"])
    paths = [r["path"] for r in f.requests]
    sid = next(iter(f.live))
    ok("/sandboxes/%s/pause" % sid in paths and "/v2/sandboxes/%s/connect" % sid in paths,
       "it paused and resumed the sandbox", paths[-6:])
    st, doc, _ = s.call("POST", "/v1/envs/%s/exec" % env, key=BOOT_KEY, body={"service": "main", "cmd": [
        "sh", "-c", "head -c 11 /work/in/a.bin; printf '\\377\\n'"]})
    ok(st == 200 and doc["stdout"] == "round trip \ufffd\n",
       "after resume the file is still there (a byte that is not UTF-8 shown as U+FFFD)", (st, doc))
    st, doc, _ = s.call("POST", "/v1/envs/%s/fork" % env, key=BOOT_KEY, body={"name": "f1"})
    body = settled(s, st, doc, timeout=30)
    ok(FORK in str(body), "fork: refused with the table's words", (st, body))
    st, doc, _ = s.call("POST", "/v1/envs/%s/verify" % env, key=BOOT_KEY, body={})
    body = settled(s, st, doc, timeout=30)
    is_((st, err_of(body)), (400, "e2b: verify.collect: not supported on e2b yet"),
        "verify: 400, not supported on e2b (the table's Verify: no)")
    st, doc, _ = s.call("POST", "/v1/sandboxes", key=BOOT_KEY, body={"image": "nosuch/image:1", "timeout_sec": 60})
    ok(st == 502 and "e2b: env.create: E2B answered 404 Not Found: template 'nosuch/image:1' not found"
       in (err_of(doc) or ""), "an image E2B has no template for: 502 with E2B's answer", (st, doc))
    s.call("POST", "/v1/projects", key=BOOT_KEY, body={"name": "two"})
    st, doc, _ = s.call("POST", "/v1/projects/two/deploy", key=BOOT_KEY, body={"compose": TWO})
    d = T.wait_deployment(s, doc["deployment"]["ID"], timeout=30) if st == 202 else doc
    ok("prepare" in str(d) and "e2b runs one container per environment; use your machines for multi-service "
       "stacks (2 services declared)" in str(d), "two services on e2b: refused at prepare", (st, d))
    st, doc, _ = s.call("DELETE", "/v1/envs/%s" % env, key=BOOT_KEY)
    ok(st == 202, "destroy: 202", (st, doc))
    d = T.wait_deployment(s, doc["deployment"]["ID"] if isinstance(doc["deployment"], dict) else doc["deployment"],
                          timeout=60)
    ok(d["deployment"]["Status"] == "succeeded", "the destroy deployment succeeds", d["deployment"])
    ok(any(r["method"] == "DELETE" and r["path"] == "/sandboxes/" + sid for r in f.requests) and not f.live,
       "DELETE /sandboxes/{id}: the sandbox is gone", f.live)



def main():
    f = FakeE2B(key=KEY)
    return D.main("e2b", IMAGE, f, {"DENV_E2B_API_URL": f.url, "DENV_E2B_SANDBOX_URL": f.url}, run,
                  lambda f: [KEY] + [sb["token"] for sb in f.live.values()])


if __name__ == "__main__":
    sys.exit(main())
