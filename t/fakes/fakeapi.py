"""The loopback HTTP server shared by the provider fakes (fake_e2b.py, fake_daytona.py).

A subclass names its API base (`base`, the path prefix denv-cp and the SDK
put before every route) and answers in `answer(method, path, query, headers,
body)` with (status, json_doc[, extra_headers]). Every request is recorded
(method, path with query, lower-cased headers, parsed body) so a test can
check what was sent; `plan` holds (status, body) answers given before
anything else, in order (an outage, a rate limit); `delay` holds every answer
that many seconds (a slow provider). Loopback only.
"""
import email.parser
import http.server
import json
import threading
import time
import urllib.parse


class FakeAPI:
    base = ""

    def __init__(self, port=0):
        self.plan = []
        self.delay = 0.0
        self.requests = []
        self.raw = b""          # the body of the request being answered, as sent
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                fake._handle(self)

            def do_POST(self):
                fake._handle(self)

            def do_DELETE(self):
                fake._handle(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d%s" % (self.port, self.base)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _handle(self, h):
        raw = self._read_body(h)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        headers = {k.lower(): v for k, v in h.headers.items()}
        split = urllib.parse.urlsplit(h.path)
        with self.lock:
            self.requests.append({"method": h.command, "path": h.path, "headers": headers, "body": body})
            self.raw = raw
            if self.plan:
                answer = self.plan.pop(0)
            elif not split.path.startswith(self.base + "/"):
                answer = self.not_found(split.path)
            else:
                answer = self.answer(h.command, split.path[len(self.base):],
                                     urllib.parse.parse_qs(split.query), headers, body)
        if self.delay:
            time.sleep(self.delay)
        status, doc = answer[0], answer[1]
        extra = answer[2] if len(answer) > 2 else {}
        # bytes go out as they are (a file, a Connect stream): extra names the type
        data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
        h.send_response(status)
        if "Content-Type" not in extra:
            h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        for k, v in extra.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _read_body(h):
        """The request body, by Content-Length or chunked (an SDK may stream)."""
        if "chunked" in (h.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while True:
                n = int(h.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += h.rfile.read(n)
                h.rfile.readline()
        n = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(n) if n else b""

    def multipart_file(self, headers, name="file"):
        """The bytes of part name of the multipart/form-data request being
        answered, or None (another type, no such part)."""
        ctype = headers.get("content-type", "")
        if not ctype.startswith("multipart/form-data"):
            return None
        msg = email.parser.BytesParser().parsebytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + self.raw)
        for part in msg.get_payload() if msg.is_multipart() else []:
            if part.get_param("name", header="content-disposition") == name:
                return part.get_payload(decode=True)
        return None

    def not_found(self, path):
        return 404, {"message": "Cannot GET %s" % path}

    def answer(self, method, path, query, headers, body):
        raise NotImplementedError
