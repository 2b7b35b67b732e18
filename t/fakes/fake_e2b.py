"""A FAKE of the E2B REST API, for tests only: it runs no sandbox.

It serves on loopback what denv-cp calls at connect (src/cp/token_check.c):
the sandbox list, with the shapes of the e2b Python SDK 2.56.0
(e2b/api/client/api/sandboxes/get_v2_sandboxes.py, models/listed_sandbox.py,
models/error.py; the key travels as X-API-KEY, e2b/api/__init__.py):

  GET /v2/sandboxes?limit=N   X-API-KEY: <key>
  200 [{templateID, sandboxID, clientID, startedAt, endAt, cpuCount, memoryMB,
        diskSizeMB, state, envdVersion, alias?, metadata?}]   (x-next-token for more)
  401 {code: 401, message: "Invalid API key"}     (the SDK raises AuthenticationException)

The API base (FakeE2B().url) is what DENV_E2B_API_URL and the SDK's
api_url / E2B_API_URL take. Knobs: `key` (the one accepted), `sandboxes`
(the list answered), and FakeAPI's `plan` and `delay`.
Run it: python3 t/fakes/fake_e2b.py [port].
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakeapi import FakeAPI  # noqa: E402


class FakeE2B(FakeAPI):
    def __init__(self, key="e2b_test_key_0123456789abcdef", port=0):
        self.key = key
        self.sandboxes = []
        super().__init__(port)

    def answer(self, method, path, query, headers, body):
        if headers.get("x-api-key") != self.key:
            return 401, {"code": 401, "message": "Invalid API key"}
        if method == "GET" and path == "/v2/sandboxes":
            try:
                limit = int((query.get("limit") or ["100"])[0])
            except ValueError:
                return 400, {"code": 400, "message": "invalid limit"}
            return 200, self.sandboxes[:max(limit, 0)]
        return 404, {"code": 404, "message": "Not found"}

    @staticmethod
    def sandbox(sid, template="base"):
        return {"templateID": template, "sandboxID": sid, "clientID": "6532622b", "alias": template,
                "startedAt": "2026-01-01T00:00:00Z", "endAt": "2026-01-01T00:05:00Z", "cpuCount": 2,
                "memoryMB": 512, "diskSizeMB": 512, "state": "running", "envdVersion": "0.2.0",
                "metadata": {}}


if __name__ == "__main__":
    f = FakeE2B(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print("fake E2B API on %s (key %s)" % (f.url, f.key), flush=True)
    try:
        f.thread.join()
    except KeyboardInterrupt:
        f.stop()
