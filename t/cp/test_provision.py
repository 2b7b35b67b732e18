"""Integration test of denv-cp's provision and join phases (targets.md,
"Placement"; deployments.md, deploy phases 3 and 4) against a fake Hetzner
Cloud API (t/fakes/hetzner.py) and the scripted sidecar (t/cp/sidecar.py),
which joins with the token the test finds in the recorded cloud-init.
Prints TAP; run by t/integ/cp-provision.sh. Everything stays on loopback.
"""
import json
import os
import re
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fakes"))
import cp_harness as T  # noqa: E402  (Server, store seeding)
import tap  # noqa: E402
from cp_harness import BOOT_KEY  # noqa: E402
from tap import ok, is_  # noqa: E402
from test_hub import SIMPLE, call, wait_until, wait_dep, phase_map, events, host_row  # noqa: E402
from sidecar import Sidecar  # noqa: E402
from hetzner import FakeHetzner  # noqa: E402
from fake_e2b import FakeE2B  # noqa: E402

PUBLIC = "http://cp.test:8080"
HZ_TOKEN = "hz-test-token-0123456789abcdef"
JOIN_WAIT_SEC = 4
NO_CLOUD = ("provision: no connected host and no cloud that can provision: connect a cloud or run "
            "`denvd join` on a machine")
FAILED_AT_PROVISION = ["ok", "ok", "failed", "skipped", "skipped", "skipped", "skipped", "skipped", "skipped",
                       "skipped", "failed"]


def deploy(s, env):
    st, doc, _ = call(s, "POST", "/v1/projects/prov/deploy", {"env": env, "compose": SIMPLE})
    assert st == 202, (st, doc)
    return doc["deployment"]["ID"]


def statuses(doc):
    return [p["Status"] for p in doc["phases"]]


def test_no_cloud(s, st8):
    call(s, "POST", "/v1/projects", {"name": "prov"})
    # A manual cloud creates nothing: it does not count.
    st, doc, _ = call(s, "POST", "/v1/clouds", {"provider": "manual", "name": "lab"})
    is_(st, 201, "a manual cloud")
    doc = wait_dep(s, deploy(s, "nocloud"))
    is_((doc["deployment"]["Status"], doc["deployment"]["Error"]), ("failed", NO_CLOUD),
        "no host and no cloud that can provision: the spec's failure")
    is_(statuses(doc), FAILED_AT_PROVISION, "provision failed, the rest skipped, verdict records it")
    is_(st8["fake"].requests, [], "and nothing was asked of the provider")


def test_provision_and_join(s, st8):
    fake = st8["fake"]
    st, doc, _ = call(s, "POST", "/v1/clouds", {"provider": "hetzner", "name": "hz", "config": {"token": HZ_TOKEN}})
    ok(st == 201 and doc["token_checked"] is True, "POST /v1/clouds: a hetzner cloud with only a token", (st, doc))
    is_([(r["method"], r["path"]) for r in fake.requests], [("GET", "/v1/servers?per_page=1")],
        "its token was checked with one read")
    cloud = doc["cloud"]["ID"]
    st8["cloud"] = cloud
    st8["secrets"].append(HZ_TOKEN)
    dep = deploy(s, "alpha")
    ok(fake.wait_requests(2), "provision calls the provider")
    r = fake.requests[1]
    is_((r["method"], r["path"]), ("POST", "/v1/servers"), "POST /v1/servers")
    is_(r["headers"].get("authorization"), "Bearer " + HZ_TOKEN, "with the cloud's token as the bearer token")
    b = r["body"]
    is_((b["server_type"], b["location"], b["image"]), ("cpx31", "nbg1", "ubuntu-24.04"),
        "server_type, location and image: the defaults")
    ok(re.fullmatch(r"denv-[a-z0-9]{6}", b["name"]) and b["start_after_create"] is True,
       "a generated server name; started after create", b["name"])
    is_(b["labels"], {"managed-by": "denv", "denv-cloud": cloud, "denv-deployment": dep}, "labels name the cloud")
    ud = b["user_data"]
    m = re.search(r"DENV_JOIN_TOKEN=(djt_[A-Za-z0-9_-]+)", ud)
    ok(ud.startswith("#cloud-config\n") and m, "user_data is cloud-config with a join token", ud[:200])
    ok("'%s/denvd'" % PUBLIC in ud and "DENV_SERVER=%s\n" % PUBLIC in ud, "it downloads denvd from -denvd-url "
       "relative to -public-url and names the server", ud)
    ok("denvd install --env-file /etc/denv/join.env" in ud and "docker.io" in ud and "permissions: '0600'" in ud,
       "it runs denvd install with the 0600 env file (whose unit runs denvd join)")
    token = m.group(1) if m else ""
    st8["secrets"].append(token)

    # The provision phase is done once the provider answered; join waits.
    def joining():
        d = call(s, "GET", "/v1/deployments/" + dep)[1]
        return d if phase_map(d)["join"]["Status"] == "running" else None
    d = wait_until(joining, 5)
    ok(d, "join is running, waiting for a host")
    ph = phase_map(d) if d else {}
    ev = ph.get("provision", {}).get("Evidence") or {}
    ip = fake.servers["4711"]["public_net"]["ipv4"]["ip"]
    is_(ev, {"cloud": cloud, "provider": "hetzner", "ref": "4711", "ip": ip, "name": b["name"]},
        "provision evidence {cloud, provider, ref, ip, name}")
    is_(ph.get("place", {}).get("Evidence"), {"host": "", "reason": "no connected host; provisioning"},
        "place evidence")
    pe = [e for e in events(s, "dep:" + dep) if e["Kind"] == "host.provisioned"]
    ok(len(pe) == 1 and pe[0]["Body"] == ev, "a host.provisioned event with the machine", pe)

    # The machine boots and its denvd joins with the token from user_data.
    sc = Sidecar(s.port, token=token, hostname=b["name"])
    ok(sc.wait_admitted(), "the sidecar joins with the token from the cloud-init")
    st8["sc"] = sc
    st8["secrets"].append(sc.secret)
    doc = wait_dep(s, dep)
    is_(doc["deployment"]["Status"], "succeeded", "the deploy continues on the new host to its verdict")
    is_(statuses(doc), ["ok", "ok", "ok", "ok", "ok", "ok", "ok", "skipped", "ok", "skipped", "ok"], "phase statuses")
    j = phase_map(doc)["join"]["Evidence"]
    ok(set(j) == {"host", "joined_in_ms"} and j["host"] == sc.host_id and isinstance(j["joined_in_ms"], int)
       and j["joined_in_ms"] >= 0, "join evidence {host, joined_in_ms}", j)
    ok(sc.commands("env.create"), "env.create went to the joined host")
    h = host_row(s, sc.host_id)
    ok(h and h["CloudID"] == cloud and h["ProviderRef"] == "4711" and h["Name"] == b["name"],
       "the host records its cloud and the server id as ProviderRef", h)
    env = call(s, "GET", "/v1/envs/" + doc["deployment"]["EnvID"])[1]["environment"]
    is_((env["HostID"], env["Status"]), (sc.host_id, "running"), "the environment lives on it")
    ok("4711" in fake.servers and "4711" not in fake.deleted, "the server that joined is kept", fake.deleted)
    again = Sidecar(s.port, token=token, hostname="box-2")
    is_(again.wait_closed(), (1008, "join: join token already used"), "the provision join token is single use")

    # With a host connected, the next deploy needs no machine.
    n = len(fake.requests)
    doc = wait_dep(s, deploy(s, "beta"))
    ph = phase_map(doc)
    ok(doc["deployment"]["Status"] == "succeeded" and ph["provision"]["Evidence"] == {"reason": "host already placed"}
       and ph["join"]["Status"] == "skipped" and ph["join"]["Evidence"] == {"reason": "host already placed"}
       and len(fake.requests) == n, "placed: provision and join skipped (host already placed)", doc["phases"][1:4])
    sc.stop()
    ok(wait_until(lambda: not host_row(s, sc.host_id)["connected"]), "the host goes away")


def test_provider_errors(s, st8):
    fake = st8["fake"]
    fake.token = "a-different-token"
    doc = wait_dep(s, deploy(s, "unauth"))
    is_((doc["deployment"]["Status"], doc["deployment"]["Error"]),
        ("failed", "provision: hetzner: unable to authenticate (HTTP 401 unauthorized)"),
        "the provider answers 401: provision fails with its message")
    is_(statuses(doc), FAILED_AT_PROVISION, "and the rest is skipped")
    is_(phase_map(doc)["provision"]["Evidence"], {"cloud": st8["cloud"], "provider": "hetzner"},
        "provision evidence names the cloud")
    fake.token = HZ_TOKEN
    fake.server_types.discard("cpx31")
    doc = wait_dep(s, deploy(s, "badtype"))
    is_(doc["deployment"]["Error"], "provision: hetzner: invalid input in field 'server_type' (HTTP 422 invalid_input)",
        "the provider answers 422: its message")
    fake.server_types.add("cpx31")
    fake.plan.append((503, {"error": {"code": "unavailable", "message": "service unavailable", "details": {}}}))
    doc = wait_dep(s, deploy(s, "down"))
    is_(doc["deployment"]["Error"], "provision: hetzner: service unavailable (HTTP 503 unavailable)",
        "a 5xx: its message too")
    dead = s.stderr(own=True)
    ok(all(x not in dead for x in st8["secrets"] if x), "no cloud token or join token in the log (-v)")


def hosts_named(s, name):
    return [h for h in call(s, "GET", "/v1/hosts")[1]["hosts"] if h["Name"] == name]


def deleted_record(s, dep, name, ref, status, kind):
    """The host row and the event that record what became of a server that never joined."""
    hs = hosts_named(s, name)
    ok(len(hs) == 1 and hs[0]["Status"] == status and hs[0]["ProviderRef"] == ref and not hs[0]["connected"]
       and hs[0]["CloudID"] and hs[0]["LastSeenAt"] is None,
       "the host row of %s says %s, with the server's ref, never seen" % (name, status), hs)
    ev = [e for e in events(s, "dep:" + dep) if e["Kind"] == kind]
    ok(ev and ev[-1]["Body"]["name"] == name and ev[-1]["Body"]["ref"] == ref
       and hs and ev[-1]["Body"]["host"] == hs[0]["ID"], "a %s event on dep:, naming the server" % kind, ev)
    ok(hs and [e for e in events(s, "host:" + hs[0]["ID"]) if e["Kind"] == kind], "and on host:")
    targets = call(s, "GET", "/v1/targets")[1]["targets"]
    ok(hs and not [t for t in targets if t["ID"] == hs[0]["ID"]], "it is no target", targets)
    return hs[0] if hs else None


def test_join_timeout(s, st8):
    fake = st8["fake"]
    n = len(fake.requests)
    t0 = time.time()
    dep = deploy(s, "lonely")
    doc = wait_dep(s, dep, timeout=JOIN_WAIT_SEC + 10)
    took = time.time() - t0
    name = fake.requests[n]["body"]["name"] if len(fake.requests) > n else "?"
    ref = phase_map(doc)["provision"]["Evidence"].get("ref", "?")
    is_((doc["deployment"]["Status"], doc["deployment"]["Error"]),
        ("failed", "join: no host of the team connected within %d s; provisioned server %s (%s) deleted"
         % (JOIN_WAIT_SEC, name, ref)),
        "nobody joins: join fails after the (shortened) wait and says the server was deleted")
    ok(JOIN_WAIT_SEC - 0.5 <= took < JOIN_WAIT_SEC + 8, "after about DENV_JOIN_WAIT_SEC", took)
    dels = [r for r in fake.requests[n:] if r["method"] == "DELETE"]
    ok(len(dels) == 1 and dels[0]["path"] == "/v1/servers/" + ref
       and dels[0]["headers"].get("authorization") == "Bearer " + HZ_TOKEN,
       "the fake saw DELETE /v1/servers/<ref> with the cloud's token", [(r["method"], r["path"]) for r in dels])
    ok(ref in fake.deleted and ref not in fake.servers, "the server is gone from the account", fake.deleted)
    is_(statuses(doc), ["ok", "ok", "ok", "failed"] + ["skipped"] * 6 + ["failed"], "phase statuses")
    ph = phase_map(doc)
    ev = ph["join"]["Evidence"]
    ok(ph["provision"]["Status"] == "ok" and ev["waited_ms"] >= JOIN_WAIT_SEC * 1000 - 100
       and ev["server"] == {"name": name, "ref": ref, "deleted": True},
       "join failure evidence: waited_ms and the deleted server", ev)
    deleted_record(s, dep, name, ref, "deleted", "host.deleted")
    st8["lonely"] = (dep, name, ref)


def test_delete_refused(s, st8):
    """The cloud refuses the delete: the phase error says so, with the
    server's name and ref, and tells the user to delete it by hand."""
    fake = st8["fake"]
    n = len(fake.requests)
    fake.delete_plan.append((500, {"error": {"code": "server_error", "message": "internal server error",
                                             "details": {}}}))
    dep = deploy(s, "stuck")
    doc = wait_dep(s, dep, timeout=JOIN_WAIT_SEC + 10)
    name = fake.requests[n]["body"]["name"] if len(fake.requests) > n else "?"
    ref = phase_map(doc)["provision"]["Evidence"].get("ref", "?")
    is_(doc["deployment"]["Error"],
        "join: no host of the team connected within %d s; provisioned server %s (%s) could not be deleted: "
        "hetzner: internal server error (HTTP 500 server_error); delete it by hand" % (JOIN_WAIT_SEC, name, ref),
        "a refused delete: the phase error names the server, its ref and the provider's answer")
    ok([r for r in fake.requests[n:] if r["method"] == "DELETE"] and ref in fake.servers,
       "the DELETE was tried and the server is still there", fake.deleted)
    ev = phase_map(doc)["join"]["Evidence"]["server"]
    ok(ev.get("deleted") is False and "HTTP 500" in ev.get("error", ""), "join evidence: deleted false, the error",
       ev)
    deleted_record(s, dep, name, ref, "delete_failed", "host.delete_failed")
    # The server cannot join any more: its token was withdrawn before the delete.
    ud = fake.requests[n]["body"]["user_data"]
    tok = re.search(r"DENV_JOIN_TOKEN=(djt_[A-Za-z0-9_-]+)", ud).group(1)
    st8["secrets"].append(tok)
    late = Sidecar(s.port, token=tok, hostname=name)
    is_(late.wait_closed(), (1008, "join: join token expired"), "its join token no longer admits it")
    st8["stuck"] = (dep, name, ref)


def test_other_host_joins(s, st8):
    """join takes any host of the team, not only the machine it made."""
    fake = st8["fake"]
    n = len(fake.requests)
    dep = deploy(s, "anyhost")
    ok(fake.wait_requests(n + 1), "a machine is requested")
    wait_until(lambda: phase_map(call(s, "GET", "/v1/deployments/" + dep)[1])["join"]["Status"] == "running", 5)
    tok = call(s, "POST", "/v1/join-tokens", {})[1]["token"]
    st8["secrets"].append(tok)
    sc = Sidecar(s.port, token=tok, hostname="handmade")
    sc.wait_admitted()
    doc = wait_dep(s, dep)
    ok(doc["deployment"]["Status"] == "succeeded" and phase_map(doc)["join"]["Evidence"]["host"] == sc.host_id,
       "a host joined by hand while join waits is taken", phase_map(doc)["join"])
    ref = phase_map(doc)["provision"]["Evidence"]["ref"]
    ok(ref in fake.servers and not [r for r in fake.requests[n:] if r["method"] == "DELETE"],
       "join succeeded: the server it provisioned is not deleted (it may still join)", fake.deleted)
    st8["anyhost_ref"] = ref
    st8["secrets"].append(sc.secret)
    sc.stop()
    wait_until(lambda: not host_row(s, sc.host_id)["connected"])


def test_restart(s, st8):
    """SIGTERM while the provider has not answered: the call is dropped, the
    process exits 0, and the next start marks the deployment failed there.
    The provider made the server all the same: the start-up sweep finds it
    by the name the join token recorded and deletes it. The same start
    retries the delete the cloud refused in test_delete_refused, and keeps
    the server of a deployment that succeeded on another host."""
    fake = st8["fake"]
    n = len(fake.requests)
    fake.delay = 3
    dep = deploy(s, "halted")
    ok(fake.wait_requests(n + 1), "a slow provider is asked for a machine")
    name = fake.requests[n]["body"]["name"]
    is_(s.stop(), 0, "SIGTERM while the call is in flight: exit 0")
    fake.delay = 0
    made = [sid for sid, v in fake.servers.items() if v["name"] == name]
    ok(len(made) == 1, "the provider created the server anyway", made)
    ref = made[0] if made else "?"
    n = len(fake.requests)
    s = T.Server(s.store, st8["env"])
    doc = wait_dep(s, dep)
    is_((doc["deployment"]["Status"], doc["deployment"]["Error"]),
        ("failed", "provision: the control plane restarted during this phase"), "after a restart: failed at provision")
    ok(wait_until(lambda: ref in fake.deleted, 5), "the start-up sweep deleted the server the lost answer made",
       fake.deleted)
    ok([r for r in fake.requests[n:] if r["method"] == "GET" and r["path"] == "/v1/servers?name=" + name],
       "it found it by name (GET /v1/servers?name=)", [(r["method"], r["path"]) for r in fake.requests[n:]])
    wait_until(lambda: hosts_named(s, name) and hosts_named(s, name)[0]["Status"] == "deleted", 5)
    deleted_record(s, dep, name, ref, "deleted", "host.deleted")
    sdep, sname, sref = st8["stuck"]
    ok(wait_until(lambda: sref in fake.deleted, 5), "the delete the cloud refused is retried at start-up", fake.deleted)
    wait_until(lambda: hosts_named(s, sname)[0]["Status"] == "deleted", 5)
    is_([h["Status"] for h in hosts_named(s, sname)], ["deleted"], "its host row now says deleted (the same row)")
    ok([e for e in events(s, "dep:" + sdep) if e["Kind"] == "host.deleted"], "with a host.deleted event")
    ok(st8["anyhost_ref"] in fake.servers, "the server of a deploy that succeeded elsewhere is kept (its token is "
       "still valid)", st8["anyhost_ref"])
    lref = st8["lonely"][2]
    is_(fake.deleted.count(lref), 1, "a server already deleted is not deleted again")
    return s


def test_restart_while_joining(s, st8):
    """SIGTERM while join waits: the next start fails the deployment at join
    and its sweep deletes the server that never joined."""
    fake = st8["fake"]
    n = len(fake.requests)
    dep = deploy(s, "waiting")
    ok(fake.wait_requests(n + 1), "a machine is requested")
    ok(wait_until(lambda: phase_map(call(s, "GET", "/v1/deployments/" + dep)[1])["join"]["Status"] == "running", 5),
       "join waits")
    name = fake.requests[n]["body"]["name"]
    ref = [sid for sid, v in fake.servers.items() if v["name"] == name][0]
    is_(s.stop(), 0, "SIGTERM while join waits: exit 0")
    ok(ref in fake.servers, "the server is still there while the control plane is down")
    s = T.Server(s.store, st8["env"])
    doc = wait_dep(s, dep)
    is_((doc["deployment"]["Status"], doc["deployment"]["Error"]),
        ("failed", "join: the control plane restarted during this phase"), "after a restart: failed at join")
    ok(wait_until(lambda: ref in fake.deleted, 5), "the start-up sweep deleted the server", fake.deleted)
    wait_until(lambda: hosts_named(s, name) and hosts_named(s, name)[0]["Status"] == "deleted", 5)
    deleted_record(s, dep, name, ref, "deleted", "host.deleted")
    return s


def test_driver_hosts(s, st8):
    """Placement creates the driver host of an e2b cloud made through POST
    /v1/clouds (EnsureDriverHosts), without GET /v1/targets first."""
    fake = st8["fake"]
    st, doc, _ = call(s, "POST", "/v1/clouds", {"provider": "e2b", "config": {"token": st8["e2b"].key}})
    e2b = doc["cloud"]["ID"]
    ok(not [h for h in call(s, "GET", "/v1/hosts")[1]["hosts"] if h["CloudID"] == e2b], "no driver host yet")
    n = len(fake.requests)
    doc = wait_dep(s, deploy(s, "ondriver"))
    hosts = [h for h in call(s, "GET", "/v1/hosts")[1]["hosts"] if h["CloudID"] == e2b]
    ok(len(hosts) == 1 and hosts[0]["Name"] == "e2b", "placement created the e2b driver host", hosts)
    ph = phase_map(doc)
    ok(hosts and ph["place"]["Evidence"] == {"host": hosts[0]["ID"], "reason": "first connected host in team"}
       and ph["provision"]["Status"] == "skipped" and len(fake.requests) == n,
       "and placed the deploy there instead of provisioning", ph["place"])
    targets = call(s, "GET", "/v1/targets")[1]["targets"]
    is_(len([t for t in targets if t["CloudID"] == e2b]), 1, "GET /v1/targets adds no second one")


def main():
    if not os.access(T.BIN, os.X_OK):
        print("1..0 # SKIP %s is not built" % T.BIN)
        return 0
    tmp = tempfile.mkdtemp(prefix="denv-cp-prov-")
    fake = FakeHetzner(token=HZ_TOKEN)
    e2b = FakeE2B()
    env = {"DENV_BOOTSTRAP_KEY": BOOT_KEY, "DENV_TEAM": "acme", "DENV_PUBLIC_URL": PUBLIC,
           "DENV_HETZNER_API_URL": fake.url, "DENV_E2B_API_URL": e2b.url, "DENV_JOIN_WAIT_SEC": str(JOIN_WAIT_SEC),
           "DENV_HOST_GRACE_SEC": "2", "DENV_COMMAND_TIMEOUT_SEC": "5"}
    st8 = {"secrets": [], "fake": fake, "e2b": e2b}
    s = None
    try:
        s = T.Server(os.path.join(tmp, "store"), env)
        st8["env"] = env
        for t in (test_no_cloud, test_provision_and_join, test_provider_errors, test_join_timeout,
                  test_delete_refused, test_other_host_joins, test_restart, test_restart_while_joining,
                  test_driver_hosts):
            s = t(s, st8) or s
        is_(s.stop(), 0, "SIGTERM: exit 0")
        log = s.stderr()
        is_([x[:8] for x in st8["secrets"] if x and x in log], [], "no secret in the whole log (-v)")
        ok("ERROR: AddressSanitizer" not in log and "runtime error:" not in log, "no sanitizer report")
        if T.PG_DSN:
            raw = json.dumps(T.pg_rows(os.path.join(tmp, "store"))).encode()
        else:
            raw = open(os.path.join(tmp, "store", "log"), "rb").read()
        is_([x[:8] for x in st8["secrets"] if x and x.startswith(("djt_", "dhs_")) and x.encode() in raw], [],
            "join tokens and host secrets are stored hashed only")
        s = None
    except Exception:
        ok(False, "test run raised", traceback.format_exc())
        if s is not None:
            print("# denv-cp stderr tail:")
            for line in s.stderr().splitlines()[-25:]:
                print("#   " + line)
            s.proc.kill()
    finally:
        fake.stop()
        e2b.stop()
    return tap.finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
