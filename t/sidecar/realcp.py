"""The real control plane (bin/denv-cp) and a denvd joined to it, for the
suites that drive both (test_with_cp.py, test_snap_cp.py, test_verify_cp.py):
start them with their logs in the run's temp dir, call the API, wait for a
deployment. Stopping them is the caller's (kill, then wait)."""
import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request

ACTIVE = ("pending", "running", "queued")
# The quickstart world: an agent box (uid 1000, egress denied) and PostgreSQL.
QUICKSTART = """
x-denv:
  egress: deny
  agent: { service: box }
services:
  box:
    image: denv-test/busybox
    user: "1000:1000"
    command: ["sleep", "3600"]
    environment: { HOME: /home/agent }
    volumes: ["home:/home/agent"]
    depends_on: [db]
  db:
    image: denv-test/debian
    command: ["postgres"]
    environment: { POSTGRES_PASSWORD: pw }
    volumes: ["pg:/var/lib/postgresql/data"]
    healthcheck: { test: ["CMD", "pg_isready", "-U", "postgres", "-h", "/run/postgresql"], interval: 1s, retries: 30 }
volumes: { home: {}, pg: {} }
"""


class RealCP:
    """bin/denv-cp on 127.0.0.1:<port_base + 0..999> with its store in tmp/db
    and a fresh bootstrap key; its log is tmp/cp.log."""

    def __init__(self, top, tmp, port_base):
        self.top, self.tmp = top, tmp
        self.key = "dak_" + secrets.token_hex(20)
        port = port_base + secrets.randbelow(1000)
        self.srv = "http://127.0.0.1:%d" % port
        log = open(os.path.join(tmp, "cp.log"), "w")
        self.proc = subprocess.Popen([top + "/bin/denv-cp", "-addr", "127.0.0.1:%d" % port, "-db", tmp + "/db",
                                      "-public-url", self.srv], env=dict(os.environ, DENV_BOOTSTRAP_KEY=self.key),
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def req(self, method, path, body=None):
        """(status, the JSON answer) or (status, the error body's text)."""
        data = json.dumps(body).encode() if body is not None else None
        r = urllib.request.Request(self.srv + path, data=data, method=method,
                                   headers={"Authorization": "Bearer " + self.key,
                                            "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(r, timeout=120) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")

    def wait_up(self):
        """Until /health answers (10 s at most; the calls after it say if not)."""
        for _ in range(100):
            try:
                urllib.request.urlopen(self.srv + "/health", timeout=1)
                return
            except OSError:
                time.sleep(0.1)

    def start_denvd(self, token, extra=()):
        """denvd join with this token, data in tmp/data, log in tmp/denvd.log."""
        log = open(os.path.join(self.tmp, "denvd.log"), "w")
        return subprocess.Popen([self.top + "/bin/denvd", "join", "--server", self.srv, "--token", token,
                                 "--state", self.tmp + "/host.json", "--data", self.tmp + "/data",
                                 "--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"]
                                + list(extra), stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def wait_connected(self, req=None):
        """GET /v1/hosts until the first host is connected (10 s at most): the last hosts seen."""
        hosts = []
        for _ in range(100):
            st, h = (req or self.req)("GET", "/v1/hosts")
            hosts = h.get("hosts", []) if st == 200 else []
            if hosts and hosts[0].get("connected"):
                break
            time.sleep(0.1)
        return hosts

    def wait_dep(self, depid, limit, req=None):
        """The deployment's view once it is no longer active, or after limit seconds, as it is then."""
        get = req or self.req
        end = time.time() + limit
        while time.time() < end:
            st, dd = get("GET", "/v1/deployments/" + depid)
            if st == 200 and dd["deployment"]["Status"] not in ACTIVE:
                return dd
            time.sleep(0.3)
        return get("GET", "/v1/deployments/" + depid)[1]
