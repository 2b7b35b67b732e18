"""A FAKE of the Hetzner Cloud API, for tests only: it creates nothing.

It serves, on loopback, the endpoints denv-cp calls to provision a machine
and to delete one that never joined (src/cp/cloud_hetzner.c), with the
request and response shapes of the public API reference
(https://docs.hetzner.cloud/, "Create a Server", "Delete a Server",
"Get all Servers"):

  POST /v1/servers  Authorization: Bearer <token>
    {name, server_type, location, image, user_data, start_after_create, labels}
  201 {server: {id, name, status, public_net: {ipv4: {ip}, ipv6: {ip}}, ...},
       action: {...}, next_actions: [...], root_password: null}
  401 {error: {code: "unauthorized", message: "unable to authenticate", details: {}}}
  422 {error: {code: "invalid_input", message: "invalid input in field 'server_type'",
               details: {fields: [{name, messages}]}}}
  DELETE /v1/servers/{id}   200 {action: {command: "delete_server", ...}}; 404 not_found
  GET /v1/servers?name=N    200 {servers: [...], meta: {pagination: {...}}}
  GET /v1/servers/{id}      200 {server}; 404 not_found

Every request is recorded (method, path, headers, parsed body) so a test can
assert the bearer token, the defaults and the cloud-init user data; a
deleted server leaves `servers` and its id goes to `deleted`. Knobs:
`token` (the one accepted), `server_types`/`locations`/`images` (what
exists), `plan` (a list of (status, body) answers used before anything else),
`delete_plan` (the same, for DELETE requests only: a cloud that refuses to
delete), `delay` (seconds to hold every answer: a slow provider).

Use it from a test (FakeHetzner().url is the API base for
DENV_HETZNER_API_URL), or run it: python3 t/fakes/hetzner.py [port].
"""
import http.server
import json
import sys
import threading
import time
import urllib.parse

SERVER_TYPES = {"cx22", "cx32", "cpx11", "cpx21", "cpx31", "cpx41", "cax11", "cax21"}
LOCATIONS = {"nbg1", "fsn1", "hel1", "ash", "hil", "sin"}
IMAGES = {"ubuntu-22.04", "ubuntu-24.04", "debian-12"}


def api_error(code, message, details=None):
    return {"error": {"code": code, "message": message, "details": details or {}}}


class FakeHetzner:
    def __init__(self, token="hz-test-token", port=0):
        self.token = token
        self.server_types = set(SERVER_TYPES)
        self.locations = set(LOCATIONS)
        self.images = set(IMAGES)
        self.plan = []          # [(status, body)] answered first, in order
        self.delete_plan = []   # [(status, body)] answered first to DELETE, in order
        self.deleted = []       # ids (strings) of the servers deleted, in order
        self.delay = 0.0        # seconds before each answer
        self.requests = []      # {method, path, headers, body}
        self.servers = {}       # id -> server object
        self.next_id = 4711
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                fake._handle(self)

            def do_GET(self):
                fake._handle(self)

            def do_DELETE(self):
                fake._handle(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d/v1" % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def wait_requests(self, n, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if len(self.requests) >= n:
                    return True
            time.sleep(0.05)
        return False

    # ---- the API ----

    def _handle(self, h):
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        with self.lock:
            self.requests.append({"method": h.command, "path": h.path,
                                  "headers": {k.lower(): v for k, v in h.headers.items()}, "body": body})
            status, doc = self._answer(h, body)
        if self.delay:
            time.sleep(self.delay)
        data = json.dumps(doc).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _answer(self, h, body):
        if h.headers.get("Authorization") != "Bearer " + self.token:
            return 401, api_error("unauthorized", "unable to authenticate")
        if self.plan:
            return self.plan.pop(0)
        if h.command == "DELETE" and self.delete_plan:
            return self.delete_plan.pop(0)
        if h.command == "DELETE" and h.path.startswith("/v1/servers/"):
            sid = h.path.rsplit("/", 1)[1]
            if sid not in self.servers:
                return 404, api_error("not_found", "server with ID '%s' not found" % sid)
            del self.servers[sid]
            self.deleted.append(sid)
            return 200, {"action": {"id": 300 + int(sid), "command": "delete_server", "status": "running",
                                    "progress": 0, "started": "2026-01-01T00:00:00+00:00", "finished": None,
                                    "resources": [{"id": int(sid), "type": "server"}], "error": None}}
        if h.command == "GET" and h.path.startswith("/v1/servers?"):
            q = urllib.parse.parse_qs(h.path.split("?", 1)[1])
            name = (q.get("name") or [None])[0]
            found = [s for s in self.servers.values() if name is None or s["name"] == name]
            return 200, {"servers": found, "meta": {"pagination": {
                "page": 1, "per_page": 25, "previous_page": None, "next_page": None, "last_page": 1,
                "total_entries": len(found)}}}
        if h.command == "GET" and h.path.startswith("/v1/servers/"):
            s = self.servers.get(h.path.rsplit("/", 1)[1])
            return (200, {"server": s}) if s else (404, api_error("not_found", "server not found"))
        if h.command != "POST" or h.path != "/v1/servers":
            return 404, api_error("not_found", "not found")
        if not isinstance(body, dict):
            return 400, api_error("json_error", "invalid JSON")
        for field, known in (("server_type", self.server_types), ("location", self.locations),
                             ("image", self.images)):
            if body.get(field) not in known:
                return 422, api_error("invalid_input", "invalid input in field '%s'" % field, {
                    "fields": [{"name": field, "messages": ["%s %s not found" % (field, body.get(field))]}]})
        if not body.get("name"):
            return 422, api_error("invalid_input", "invalid input in field 'name'",
                                  {"fields": [{"name": "name", "messages": ["Missing data for required field."]}]})
        sid = self.next_id
        self.next_id += 1
        server = {
            "id": sid, "name": body["name"], "status": "initializing", "created": "2026-01-01T00:00:00+00:00",
            "public_net": {
                "ipv4": {"id": sid, "ip": "203.0.113.%d" % (sid % 250 + 1), "blocked": False,
                         "dns_ptr": "static.example.your-server.de"},
                "ipv6": {"id": sid, "ip": "2001:db8:%x::/64" % sid, "blocked": False, "dns_ptr": []},
                "floating_ips": [], "firewalls": []},
            "private_net": [],
            "server_type": {"id": 9, "name": body["server_type"], "cores": 4, "memory": 8.0, "disk": 160,
                            "architecture": "arm" if body["server_type"].startswith("cax") else "x86"},
            "datacenter": {"id": 2, "name": body["location"] + "-dc3",
                           "location": {"id": 1, "name": body["location"]}},
            "image": {"id": 161547269, "type": "system", "name": body["image"], "os_flavor": "ubuntu"},
            "labels": body.get("labels") or {}, "volumes": [], "load_balancers": [],
            "protection": {"delete": False, "rebuild": False}, "rescue_enabled": False, "locked": False,
            "backup_window": None, "outgoing_traffic": None, "ingoing_traffic": None, "included_traffic": 0,
            "primary_disk_size": 160, "iso": None, "placement_group": None,
        }
        self.servers[str(sid)] = server
        action = {"id": 100 + sid, "command": "create_server", "status": "running", "progress": 0,
                  "started": "2026-01-01T00:00:00+00:00", "finished": None,
                  "resources": [{"id": sid, "type": "server"}], "error": None}
        start = dict(action, id=200 + sid, command="start_server")
        return 201, {"server": server, "action": action, "next_actions": [start], "root_password": None}


if __name__ == "__main__":
    f = FakeHetzner(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print("fake Hetzner Cloud API on %s (token %s)" % (f.url, f.token), flush=True)
    try:
        f.thread.join()
    except KeyboardInterrupt:
        f.stop()
