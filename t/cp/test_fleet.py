"""bench/lib/fleet.py, the scale benchmark's simulated sidecars, against a
real denv-cp: they join with join tokens and write back their host ids and
secrets, come back as known hosts with those, answer the commands of a
deploy and of execs (on every host), are refused as a whole on a bad
token, and stop on SIGTERM with a count of what they answered. With
build/bench/cp-envs built: it spreads a filled store's environments over
the joined hosts. Prints TAP; run by t/integ/cp-fleet.sh."""
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib"))
import cp_harness as T  # noqa: E402
from cp_harness import BOOT_KEY  # noqa: E402
import tap  # noqa: E402
from tap import ok, is_  # noqa: E402

TOP = os.environ.get("DENV_TOP") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLEET = os.path.join(TOP, "bench", "lib", "fleet.py")
CP_ENVS = os.path.join(TOP, "build", "bench", "cp-envs")
HOSTS = 3
LINE_WAIT_S = 60      # a fleet's first line (all admitted) on a loaded machine
COMPOSE = """services:
  box:
    image: denv-test/busybox
    command: ["sleep", "3600"]
"""


def call(s, method, path, body=None):
    st, doc, _ = s.call(method, path, body, key=BOOT_KEY)
    return st, doc


def wait_until(fn, timeout=30, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return fn()


class Fleet:
    def __init__(self, port, creds_path):
        self.proc = subprocess.Popen([sys.executable, FLEET, str(port), creds_path, "1"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], LINE_WAIT_S)
        self.first = self.proc.stdout.readline().strip() if ready else ""

    def stop(self, signal_it=True):
        """SIGTERM (or, signal_it False, its own end): (exit status, its last line)."""
        if signal_it and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=60)
        lines = out.strip().splitlines()
        return self.proc.returncode, lines[-1] if lines else ""


def write(path, creds):
    with open(path, "w") as f:
        json.dump(creds, f)


def connected(s):
    return sorted(h["Name"] for h in call(s, "GET", "/v1/hosts")[1]["hosts"] if h.get("connected"))


def test_join(s, creds_path):
    toks = [{"token": call(s, "POST", "/v1/join-tokens", {})[1]["token"]} for _ in range(HOSTS)]
    write(creds_path, toks)
    fl = Fleet(s.port, creds_path)
    ok(fl.first.startswith("fleet: admitted %d in " % HOSTS), "the fleet joins every sidecar, then says so", fl.first)
    with open(creds_path) as f:
        creds = json.load(f)
    ok(len(creds) == HOSTS and all(c["host_id"].startswith("host_") and c["secret"].startswith("dhs_")
                                   for c in creds) and len({c["host_id"] for c in creds}) == HOSTS,
       "CREDS now holds each one's host id and dhs_ secret", creds)
    names = ["sim-%d" % i for i in range(HOSTS)]
    is_(wait_until(lambda: connected(s) == names), True, "denv-cp lists them connected, by name")
    is_(fl.stop(), (0, "fleet: answered 0 commands ()"), "SIGTERM: exit 0 and the count of commands answered")
    return creds


def test_commands(s, creds_path):
    fl = Fleet(s.port, creds_path)
    ok(fl.first.startswith("fleet: admitted %d in " % HOSTS), "they come back with their secrets", fl.first)
    ok(wait_until(lambda: len(connected(s)) == HOSTS), "and are connected again")
    envs = []
    for i in range(HOSTS):
        call(s, "POST", "/v1/projects", {"name": "fleet-%d" % i})
        st, d = call(s, "POST", "/v1/projects/fleet-%d/deploy" % i, {"compose": COMPOSE})
        dd = T.wait_deployment(s, d["deployment"]["ID"], timeout=60) if st == 202 else {}
        is_(dd.get("deployment", {}).get("Status"), "succeeded", "deploy %d on a simulated host succeeds" % i)
        envs.append(d["deployment"]["EnvID"] if st == 202 else "")
    hosts = {call(s, "GET", "/v1/envs/" + e)[1]["environment"]["HostID"] for e in envs if e}
    is_(len(hosts), HOSTS, "spread placement put one on each host")
    for i, e in enumerate(envs):
        st, r = call(s, "POST", "/v1/envs/%s/exec" % e, {"service": "box", "cmd": ["echo", "w%d" % i]})
        is_((st, r.get("stdout") if isinstance(r, dict) else r), (200, "w%d\n" % i), "exec through host %d" % i)
    rc, last = fl.stop()
    is_((rc, last), (0, "fleet: answered %d commands (env.create=%d env.exec=%d env.snapshot=%d)" % (
        3 * HOSTS, HOSTS, HOSTS, HOSTS)), "what they answered, by kind")


def test_refused(s, tmp):
    path = os.path.join(tmp, "bad.json")
    write(path, [{"token": "djt_not_a_token"}])
    fl = Fleet(s.port, path)
    is_(fl.first, "fleet: refused: 1008 join: unknown join token", "a refused sidecar: the fleet says why")
    is_(fl.stop(signal_it=False)[0], 1, "and exits 1 by itself")


def test_cp_envs(store, s_env, creds):
    if not os.access(CP_ENVS, os.X_OK):
        tap.skip("cp-envs spreads environments over the hosts", "%s is not built (make bench)" % CP_ENVS)
        return
    db = T.db_args(store)[0][1]
    r = subprocess.run([CP_ENVS, db, "30", "10"], capture_output=True, text=True)
    ok(r.returncode == 0 and "on %d hosts" % HOSTS in r.stdout, "cp-envs fills the store over the joined hosts",
       r.stdout + r.stderr)
    s = T.Server(store, s_env)
    try:
        on = {}
        for p in call(s, "GET", "/v1/projects")[1]["projects"]:
            if p["Name"].startswith("bench-"):
                for e in call(s, "GET", "/v1/projects/%s/envs" % p["ID"])[1]["environments"]:
                    on[e["HostID"]] = on.get(e["HostID"], 0) + 1
        is_(on, {c["host_id"]: 10 for c in creds}, "round-robin: 10 environments on each host")
    finally:
        s.stop()


def run(store, env, tmp):
    """The tests on one denv-cp; its stderr tail when one raises."""
    s = T.Server(store, env)
    try:
        creds = test_join(s, os.path.join(tmp, "creds.json"))
        test_commands(s, os.path.join(tmp, "creds.json"))
        test_refused(s, tmp)
    except Exception:
        tail = "\n".join(s.stderr().splitlines()[-25:])
        ok(False, "test run raised", traceback.format_exc() + "denv-cp stderr tail:\n" + tail)
        return None
    finally:
        is_(s.stop(), 0, "denv-cp: exit 0")
    return creds


def main():
    for what, missing in (("bin/denv-cp is not built", not os.access(T.BIN, os.X_OK)),
                          ("python/.venv with websockets is not set up", not importlib.util.find_spec("websockets"))):
        if missing:
            print("1..0 # SKIP " + what)
            return 0
    tmp = tempfile.mkdtemp(prefix="denv-cp-fleet-")
    store = os.path.join(tmp, "store")
    env = {"DENV_BOOTSTRAP_KEY": BOOT_KEY, "DENV_TEAM": "acme"}
    creds = run(store, env, tmp)
    if creds:
        test_cp_envs(store, env, creds)
    return tap.finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
