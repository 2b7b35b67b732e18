"""Integration test of the token check at connect (src/cp/token_check.c):
POST /v1/clouds and POST /v1/targets/connect try the token with the
provider's cheapest authenticated read before anything is stored, here
against the fakes under t/fakes/ (which the providers' own SDKs accept:
t/fakes/test_sdks.py), and `denv cloud connect` shows the same answers.
Modal is refused at connect. Prints TAP; run by t/integ/cp-tokens.sh.
Loopback only.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fakes"))
import cp_harness as T  # noqa: E402  (Server, store seeding)
import tap  # noqa: E402
from cp_harness import BOOT_KEY, err_of  # noqa: E402
from tap import ok, is_  # noqa: E402
from hetzner import FakeHetzner  # noqa: E402
from fake_e2b import FakeE2B  # noqa: E402
from fake_daytona import FakeDaytona  # noqa: E402

HZ = "hz-token-checked-0123456789"
E2B = "e2b_token_checked_0123456789"
DT = "dtn_token_checked_0123456789"
CLI = os.path.join(T.TOP, "bin", "denv")
MODAL = ("modal: not supported: Modal's sandbox API is gRPC-only (its client library speaks gRPC to Modal's "
         "servers) and denv-cp drives providers over REST; run on your own machines, e2b, daytona or prime")


def names(s, path, key):
    doc = s.call("GET", path, key=BOOT_KEY)[1]
    return sorted(x["Name"] for x in doc[key])


def test_hetzner(s, f):
    n = len(f["hz"].requests)
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY,
                        body={"provider": "hetzner", "name": "hz-bad", "config": {"token": "hz-wrong"}})
    is_((st, err_of(doc)), (400, "hetzner: token refused (401 Unauthorized: unable to authenticate)"),
        "hetzner, a wrong token: 400 with the provider's answer")
    r = f["hz"].requests[n] if len(f["hz"].requests) > n else {}
    is_((r.get("method"), r.get("path"), r.get("headers", {}).get("authorization")),
        ("GET", "/v1/servers?per_page=1", "Bearer hz-wrong"), "checked with GET /servers?per_page=1 and the bearer token")
    ok("hz-bad" not in names(s, "/v1/clouds", "clouds"), "and the cloud is not stored")
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY,
                        body={"provider": "hetzner", "name": "hz", "config": {"token": HZ}})
    ok(st == 201 and doc["token_checked"] is True and doc["cloud"]["Name"] == "hz",
       "hetzner, the right token: 201 token_checked true", (st, doc))
    f["hz"].plan.append((503, {"error": {"code": "unavailable", "message": "service unavailable", "details": {}}}))
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY,
                        body={"provider": "hetzner", "name": "hz-down", "config": {"token": HZ}})
    is_((st, err_of(doc)), (502, "hetzner: cannot check the token: GET %s/servers?per_page=1 answered 503 "
                                 "Service Unavailable: service unavailable" % f["hz"].url),
        "the provider failing: 502 saying what it answered")
    ok("hz-down" not in names(s, "/v1/clouds", "clouds"), "and nothing stored")


def test_e2b(s, f):
    n = len(f["e2b"].requests)
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "e2b", "token": "e2b_wrong"})
    is_((st, err_of(doc)), (400, "e2b: token refused (401 Unauthorized: Invalid API key)"),
        "e2b, a wrong token: 400 naming the provider and its answer")
    r = f["e2b"].requests[n] if len(f["e2b"].requests) > n else {}
    is_((r.get("method"), r.get("path"), r.get("headers", {}).get("x-api-key")),
        ("GET", "/v2/sandboxes?limit=1", "e2b_wrong"), "checked with the SDK's list call and X-API-KEY")
    is_(names(s, "/v1/targets", "targets"), [], "no target from a refused token")
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "e2b", "token": E2B})
    ok(st == 201 and doc["info"] == {"provider": "e2b", "token_checked": True}
       and doc["host"]["CloudID"] == doc["cloud"]["ID"], "e2b, the right token: 201 info.token_checked true", (st, doc))
    t = [x for x in s.call("GET", "/v1/targets", key=BOOT_KEY)[1]["targets"] if x.get("provider") == "e2b"]
    ok(len(t) == 1 and t[0]["connected"] is True, "and the e2b target is listed", t)
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY,
                        body={"provider": "e2b", "name": "e2b-crlf", "token": "e2b_x\r\nX-Other: 1"})
    is_((st, err_of(doc)), (400, "e2b: the token is not a usable API token"),
        "a token that would break the header: 400, never sent")
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY,
                        body={"provider": "e2b", "name": "e2b-c", "config": {"token": "nope"}})
    is_((st, err_of(doc)), (400, "e2b: token refused (401 Unauthorized: Invalid API key)"),
        "POST /v1/clouds checks an e2b token the same way")


def test_daytona(s, f):
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "daytona", "token": "dtn_wrong"})
    is_((st, err_of(doc)), (400, "daytona: token refused (401 Unauthorized: Invalid API key)"),
        "daytona, a wrong token: 400 naming the provider and its answer")
    r = f["dt"].requests[-1] if f["dt"].requests else {}
    is_((r.get("method"), r.get("path"), r.get("headers", {}).get("authorization")),
        ("GET", "/api/sandbox?limit=1", "Bearer dtn_wrong"), "checked with the SDK's list call and the bearer key")
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY,
                        body={"provider": "daytona", "name": "dt", "config": {"token": DT}})
    ok(st == 201 and doc["token_checked"] is True, "daytona, the right token: 201 token_checked true", (st, doc))


def test_race(s, f):
    """Two connects of one name while the provider is slow: one is stored."""
    f["dt"].delay = 0.5
    out = []

    def go():
        out.append(s.call("POST", "/v1/targets/connect", key=BOOT_KEY,
                          body={"provider": "daytona", "name": "twin", "token": DT})[0])
    th = [threading.Thread(target=go) for _ in range(2)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    f["dt"].delay = 0
    is_(sorted(out), [201, 409], "two connects of one name at once: 201 and 409")
    is_(names(s, "/v1/clouds", "clouds").count("twin"), 1, "one cloud stored")


def test_modal(s, f):
    for path, body in (("/v1/targets/connect", {"provider": "modal", "token": "ak-x"}),
                       ("/v1/clouds", {"provider": "modal", "config": {"token": "ak-x"}})):
        st, doc, _ = s.call("POST", path, key=BOOT_KEY, body=body)
        is_((st, err_of(doc)), (400, MODAL), "%s refuses modal: not supported, its client speaks gRPC" % path)


def test_unreachable(tmp):
    s = T.Server(os.path.join(tmp, "store2"), {"DENV_BOOTSTRAP_KEY": BOOT_KEY, "DENV_TEAM": "acme",
                                               "DENV_E2B_API_URL": "http://127.0.0.1:9",
                                               "DENV_DAYTONA_API_URL": "ftp://daytona.example/api"})
    try:
        st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "e2b", "token": E2B})
        e = err_of(doc) or ""
        ok(st == 502 and e.startswith("e2b: cannot reach the API to check the token "
                                      "(GET http://127.0.0.1:9/v2/sandboxes?limit=1): ") and "refused" in e,
           "an unreachable provider: 502 saying so", (st, doc))
        st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "daytona", "token": DT})
        ok(st == 502 and (err_of(doc) or "").startswith("daytona: cannot check the token: "),
           "an API base that is not an http(s) URL: 502", (st, doc))
        is_(s.call("GET", "/v1/clouds", key=BOOT_KEY)[1]["clouds"], [], "and nothing stored")
    finally:
        is_(s.stop(), 0, "second server: exit 0")


def cli(s, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DENV_")}
    env.update({"DENV_SERVER": "http://127.0.0.1:%d" % s.port, "DENV_API_KEY": BOOT_KEY})
    p = subprocess.run([CLI] + list(args), env=env, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def test_cli(s, f):
    if not os.access(CLI, os.X_OK):
        ok(True, "# SKIP bin/denv is not built")
        return
    rc, out, err = cli(s, "cloud", "connect", "e2b", "--name", "e2b-cli", "--token", "e2b_wrong")
    ok(rc == 1 and "e2b: token refused (401 Unauthorized: Invalid API key)" in err,
       "denv cloud connect e2b with a wrong token: exit 1 with the provider's answer", (rc, out, err))
    rc, out, err = cli(s, "cloud", "connect", "e2b", "--name", "e2b-cli", "--token", E2B)
    ok(rc == 0 and json.loads(out)["token_checked"] is True, "with the right one: exit 0, token_checked true",
       (rc, out, err))
    rc, out, err = cli(s, "cloud", "connect", "modal", "--token", "ak-x")
    ok(rc == 1 and MODAL in err, "denv cloud connect modal: refused with the reason", (rc, err))


def main():
    if not os.access(T.BIN, os.X_OK):
        print("1..0 # SKIP %s is not built" % T.BIN)
        return 0
    tmp = tempfile.mkdtemp(prefix="denv-cp-tokens-")
    f = {"hz": FakeHetzner(token=HZ), "e2b": FakeE2B(key=E2B), "dt": FakeDaytona(key=DT)}
    env = {"DENV_BOOTSTRAP_KEY": BOOT_KEY, "DENV_TEAM": "acme", "DENV_HETZNER_API_URL": f["hz"].url,
           "DENV_E2B_API_URL": f["e2b"].url + "/", "DENV_DAYTONA_API_URL": f["dt"].url}
    s = None
    try:
        s = T.Server(os.path.join(tmp, "store"), env)
        for t in (test_hetzner, test_e2b, test_daytona, test_race, test_modal, test_cli):
            t(s, f)
        is_(s.stop(), 0, "SIGTERM: exit 0")
        log = s.stderr()
        is_([x for x in (HZ, E2B, DT, "e2b_wrong", "dtn_wrong", "hz-wrong") if x in log], [],
            "no token in the log (-v)")
        ok("ERROR: AddressSanitizer" not in log and "runtime error:" not in log, "no sanitizer report")
        s = None
        test_unreachable(tmp)
    except Exception:
        ok(False, "test run raised", traceback.format_exc())
        if s is not None:
            print("# denv-cp stderr tail:")
            for line in s.stderr().splitlines()[-25:]:
                print("#   " + line)
            s.proc.kill()
    finally:
        for x in f.values():
            x.stop()
    return tap.finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
