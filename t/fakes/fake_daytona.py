"""A FAKE of the Daytona API, for tests only: it runs no sandbox.

It serves on loopback what denv-cp calls at connect (src/cp/token_check.c):
the sandbox list, with the shapes of the daytona Python SDK 0.226.1 and its
daytona-api-client (api/sandbox_api.py list_sandboxes: GET /sandbox with
cursor and limit; models/list_sandboxes_response.py; the key as a bearer
token, daytona/_sync/daytona.py; errors are read from {message, code?,
source?}, daytona/_utils/errors.py, and a 401 raises DaytonaAuthenticationError):

  GET /api/sandbox?limit=N   Authorization: Bearer <key>
  200 {items: [...], nextCursor: null}
  401 {statusCode: 401, message: "Invalid API key", error: "Unauthorized"}

The API base (FakeDaytona().url, ending in /api) is what
DENV_DAYTONA_API_URL and the SDK's api_url / DAYTONA_API_URL take. Knobs:
`key` (the one accepted), `sandboxes` (list items answered), and FakeAPI's
`plan` and `delay`. Run it: python3 t/fakes/fake_daytona.py [port].
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakeapi import FakeAPI  # noqa: E402


class FakeDaytona(FakeAPI):
    base = "/api"

    def __init__(self, key="dtn_test_key_0123456789abcdef", port=0):
        self.key = key
        self.sandboxes = []
        super().__init__(port)

    def not_found(self, path):
        return 404, {"statusCode": 404, "message": "Cannot GET %s" % path, "error": "Not Found"}

    def answer(self, method, path, query, headers, body):
        if headers.get("authorization") != "Bearer " + self.key:
            return 401, {"statusCode": 401, "message": "Invalid API key", "error": "Unauthorized"}
        if method == "GET" and path == "/sandbox":
            try:
                limit = int((query.get("limit") or ["100"])[0])
            except ValueError:
                return 400, {"statusCode": 400, "message": "limit must be an integer", "error": "Bad Request"}
            return 200, {"items": self.sandboxes[:max(limit, 0)], "nextCursor": None}
        return self.not_found(path)


if __name__ == "__main__":
    f = FakeDaytona(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print("fake Daytona API on %s (key %s)" % (f.url, f.key), flush=True)
    try:
        f.thread.join()
    except KeyboardInterrupt:
        f.stop()
