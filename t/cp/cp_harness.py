"""What the control plane's integration suites share: the denv-cp under test
(Server, started on a temporary store, on the file store or PostgreSQL),
requests the standard library cannot make, the quickstart compose file, the
refusals compose.md words, and seeding the store's log directly.
The suites (t/cp/test_*.py) report TAP through t/lib/tap.py.
"""
import http.client
import json
import os
import re
import signal
import struct
import subprocess
import time
import zlib

TOP = os.environ.get("DENV_TOP", os.getcwd())
BIN = os.environ.get("DENV_CP_BIN") or os.path.join(TOP, "bin", "denv-cp")
BOOT_KEY = "dak_integration_bootstrap_key_0123456789"
CONSOLE = "http://console.example"
BULLETS = "\u2022\u2022\u2022"
PG_DSN = os.environ.get("DENV_TEST_PG_DSN")
PG_DBS = {"store": "denv", "gh": "gh", "gen": "gen", "moved": "moved", "store2": "store2"}
PHASES = ["resolve", "place", "provision", "join", "prepare", "start",
          "health", "warm", "snapshot", "ingress", "verdict"]

# ---- the server ----

def pg_dsn(store):
    """The database a store name maps to under DENV_TEST_PG_DSN."""
    return PG_DSN.replace("/denv?", "/%s?" % PG_DBS[os.path.basename(store)], 1)


def db_args(store):
    """-db for this store, and the environment it needs."""
    if not PG_DSN:
        return ["-db", store], {}
    os.makedirs(store, exist_ok=True)
    return ["-db", pg_dsn(store)], {"DENV_FILES_DIR": store}


class Server:
    def __init__(self, store, env=None, args=None, db=None):
        """db: this -db instead of the store's own ("": no -db at all)."""
        self.store = store
        self.errpath = store + ".stderr"
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("DENV_"):
                del e[k]
        e.update(env or {})
        if db is not None:
            dbflag, dbenv = (["-db", db] if db else []), {}
        else:
            dbflag, dbenv = db_args(store)
        e.update(dbenv)
        self.err = open(self.errpath, "ab")
        self.start = self.err.tell()  # this run's part of the file
        self.proc = subprocess.Popen(
            [BIN, "-addr", "127.0.0.1:0", "-v"] + dbflag + (args or []),
            stdout=subprocess.DEVNULL, stderr=self.err, env=e)
        self.port = None
        deadline = time.time() + 10
        while time.time() < deadline and self.port is None:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.stderr(own=True))
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.port is None:
            raise RuntimeError("denv-cp did not start:\n" + self.stderr())

    def stderr(self, own=False):
        """The stderr file; own: only what this run wrote."""
        with open(self.errpath, "rb") as f:
            return f.read()[self.start if own else 0:].decode("utf-8", "replace")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.err.close()
        return rc

    def call(self, method, path, body=None, key=None, headers=None, raw=None):
        h = dict(headers or {})
        if key:
            h["Authorization"] = "Bearer " + key
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            payload = r.read()
            hdrs = {k.lower(): v for k, v in r.getheaders()}
        finally:
            c.close()
        try:
            doc = json.loads(payload) if payload else None
        except ValueError:
            doc = payload
        return r.status, doc, hdrs


def status_of_big(server, method, path, payload, key):
    """Status of a request whose body the server may refuse before reading
    it all (413): write what the peer takes, then read the answer."""
    import socket
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    head = ("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (method, path, key, len(payload))).encode()
    try:
        sock.sendall(head + payload)
    except (BrokenPipeError, ConnectionResetError):
        pass
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    sock.close()
    m = re.match(rb"HTTP/1\.1 (\d+)", data)
    return int(m.group(1)) if m else None


def upgrade_status(server, path, key):
    """Status line of a WebSocket upgrade request (101 is not for http.client)
    and the body of a refusal."""
    import socket
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    sock.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                  "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n" % (path, key)).encode())
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        m = re.match(rb"HTTP/1\.1 (\d+)", head)
        status = int(m.group(1)) if m else None
        if status != 101:
            n = re.search(rb"(?i)content-length: *(\d+)", head)
            while n and len(body) < int(n.group(1)):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                body += chunk
    finally:
        sock.close()
    try:
        doc = json.loads(body) if status != 101 and body else None
    except ValueError:
        doc = body
    return status, doc


def wait_deployment(s, dep_id, timeout=10):
    """GET the deployment until it is no longer pending or running."""
    deadline = time.time() + timeout
    while True:
        st, doc, _ = s.call("GET", "/v1/deployments/" + dep_id, key=BOOT_KEY)
        if doc["deployment"]["Status"] not in ("pending", "running") or time.time() > deadline:
            return doc
        time.sleep(0.05)


def err_of(doc):
    return doc.get("error") if isinstance(doc, dict) else doc


# ---- the quickstart compose (spec/quickstart.md), with line breaks ----

QUICKSTART = """x-denv:
  kind: rl-environment
  agent:
    service: box
  verifier:
    image: busybox:1.36
    command: ["sh", "-c", "[ \\"$(cat /submission/home/agent/answer.txt)\\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt"]
    collect: ["/home/agent/answer.txt"]
services:
  db:
    image: postgres:16-alpine
    environment: { POSTGRES_PASSWORD: world }
    volumes: ["pg:/var/lib/postgresql/data"]
    healthcheck: { test: ["CMD-SHELL", "pg_isready -U postgres"], interval: 2s, retries: 30 }
  box:
    image: python:3.12-slim
    user: "1000:1000"
    command: ["sleep", "infinity"]
    environment: { HOME: /home/agent, PGHOST: db, PGPASSWORD: world }
    volumes: ["home:/home/agent"]
    depends_on: [db]
volumes: { pg: {}, home: {} }
"""

# Refusals with the exact messages of compose.md.
REFUSALS = [
    ("services: {}\n", "compose: no services"),
    ("services:\n  app:\n    user: \"1000\"\n",
     'compose: service "app" has no image and nothing to build (set image: or build:)'),
    ("services:\n  app:\n    build: .\n",
     'compose: service "app" builds from "." but its context was not sent (denv deploy -f packs and '
     'uploads it; API clients PUT /v1/contexts/{sha256} and name it in contexts)'),
    ("services:\n  app:\n    image: a\n    network_mode: host\n",
     'compose: service "app" uses network_mode: host, which cannot be forked'),
    ("services:\n  app:\n    image: a\n    privileged: true\n",
     'compose: service "app" asks for privileged or cap_add, which is refused'),
    ("services:\n  app:\n    image: a\n    volumes: [\"/srv:/data\"]\n",
     'compose: service "app" bind-mounts "/srv"; only named volumes are forkable'),
    ("services:\n  app:\n    image: a\n    volumes: [\"v:/data\"]\n",
     'compose: service "app" uses undeclared volume "v"'),
    ("x-denv:\n  egress: maybe\nservices:\n  app: {image: a}\n",
     'compose: x-denv.egress must be deny or allow, got "maybe"'),
    ("x-denv:\n  agent: {service: app}\nservices:\n  app: {image: a}\n",
     'compose: x-denv.agent.service "app" must set a non-root user (user: "1000:1000"); the agent is never root'),
    ("x-denv:\n  agent: {service: app}\n  verifier: {image: g}\nservices:\n  app: {image: a, user: \"1000\"}\n",
     "compose: x-denv.verifier.command is required"),
]


# ---- store log seeding (for the restart test: rows no route creates yet) ----

def append_records(store, ops_list):
    """Append transactions to the store's log in its on-disk format (with
    PostgreSQL: upsert the rows into its table, through psql)."""
    if PG_DSN:
        sql = ["BEGIN;"]
        for ops in ops_list:
            for op in ops:
                doc = json.dumps(op["row"], separators=(",", ":"))
                assert "$denv$" not in doc
                sql.append("INSERT INTO denv_rows (tbl, id, doc) VALUES ('%s', '%s', $denv$%s$denv$) "
                           "ON CONFLICT (tbl, id) DO UPDATE SET doc = EXCLUDED.doc;" % (op["put"], op["id"], doc))
        sql.append("COMMIT;")
        subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", pg_dsn(store)], input="\n".join(sql).encode(),
                       check=True, stdout=subprocess.DEVNULL)
        return
    with open(os.path.join(store, "log"), "ab") as f:
        for ops in ops_list:
            payload = json.dumps({"ops": ops}, separators=(",", ":")).encode()
            f.write(struct.pack("<II", len(payload), zlib.crc32(payload) & 0xffffffff))
            f.write(payload)


def pg_rows(store):
    """With PostgreSQL: every row now stored, as put ops (no history)."""
    out = subprocess.run(["psql", "-qAt", "-v", "ON_ERROR_STOP=1", pg_dsn(store), "-c",
                          "SELECT json_build_object('put', tbl, 'id', id, 'row', doc) FROM denv_rows ORDER BY tbl, id"],
                         check=True, stdout=subprocess.PIPE).stdout.decode()
    return [json.loads(line) for line in out.splitlines() if line]


def crockford_ulid(ms, n):
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    v = (ms << 80) | n
    s = ""
    for _ in range(26):
        s = alphabet[v & 31] + s
        v >>= 5
    return s
