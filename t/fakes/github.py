"""A FAKE of GitHub's OAuth web flow and of the REST API's user routes, for
tests only: nobody signs in anywhere.

It serves, on loopback, what denv-cp's GitHub sign-in calls
(src/cp/auth_github.c), with the shapes of GitHub's documentation
("Authorizing OAuth apps", "Troubleshooting OAuth app access token request
errors", REST "Users" and "Emails") as PyGithub 2.10.0 reads them
(github/ApplicationOAuth.py get_login_url, get_access_token and _checkError;
github/Requester.py, which sends the token as "Authorization: token T";
github/AuthenticatedUser.py get_emails, which reads email, primary,
verified, visibility):

  GET  /login/oauth/authorize?client_id&redirect_uri&scope&state
       approves at once as the configured user: 302 to
       redirect_uri?code=C&state=S (with --deny: ?error=access_denied&
       error_description=...&state=S); an unknown client_id: 404. With
       --consent it first shows a page whose Authorize button
       (#js-oauth-authorize-btn, GitHub's id) posts the same fields to
       POST /login/oauth/authorize, which then redirects as above.
  POST /login/oauth/access_token   client_id, client_secret, code,
       redirect_uri (form or JSON body). With Accept: application/json:
       200 {access_token: "gho_...", token_type: "bearer", scope: "read:user,user:email"}
       200 {error: "bad_verification_code", error_description, error_uri}
           (GitHub answers errors with 200 too), likewise
           incorrect_client_credentials and redirect_uri_mismatch.
       Without it the same fields form-encoded, as GitHub does.
       A code is good once, for ten minutes, for the client it was made for.
  GET  /user          200 the user; 401 {message: "Requires authentication"}
                      or {message: "Bad credentials"}, documentation_url, status.
  GET  /user/emails   200 [{email, primary, verified, visibility}]; 404 without
                      the user:email scope.

The API is served at / and at /api/v3 (GitHub Enterprise's layout, which
PyGithub uses for any base_url but api.github.com). Each request is logged
as one JSON line (method, path, headers, form) to --log.

Run: python3 t/fakes/github.py --port-file F [--host 127.0.0.2] [--log F] [--client-id ID]
[--client-secret S] [--id N] [--login L] [--name N] [--email E] [--private-email] [--deny] [--consent]
"""
import argparse
import html
import http.server
import json
import os
import secrets
import sys
import threading
import time
import urllib.parse

DOCS = "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/"
CODE_TTL = 600


class FakeGitHub:
    def __init__(self, opts):
        self.o = opts
        self.codes = {}    # code -> (client_id, redirect_uri, scope, expires)
        self.tokens = {}   # token -> scope
        self.lock = threading.Lock()
        self.log = open(opts.log, "a") if opts.log else None
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                fake.handle(self, "GET")

            def do_POST(self):
                fake.handle(self, "POST")

        self.httpd = http.server.ThreadingHTTPServer((opts.host, 0), Handler)
        self.port = self.httpd.server_address[1]

    def user(self):
        o, uid = self.o, self.o.id
        return {
            "login": o.login, "id": uid, "node_id": "MDQ6VXNlcjU4MzIzMQ==",
            "avatar_url": "https://avatars.githubusercontent.com/u/%d?v=4" % uid, "gravatar_id": "",
            "url": "https://api.github.com/users/" + o.login, "html_url": "https://github.com/" + o.login,
            "type": "User", "site_admin": False, "name": o.name, "company": None, "blog": "",
            "location": None, "email": None if o.private_email else o.email, "hireable": None, "bio": None,
            "twitter_username": None, "public_repos": 8, "public_gists": 0, "followers": 3, "following": 1,
            "created_at": "2011-01-25T18:44:36Z", "updated_at": "2026-11-01T09:00:00Z",
        }

    # ---- plumbing ----

    def send(self, h, status, body, ctype="application/json; charset=utf-8", extra=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.send_header("X-GitHub-Media-Type", "github.v3; format=json")
        for k, v in (extra or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def form(self, h):
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n).decode() if n else ""
        if (h.headers.get("Content-Type") or "").startswith("application/json"):
            return json.loads(raw or "{}")
        return {k: v[0] for k, v in urllib.parse.parse_qs(raw).items()}

    def handle(self, h, method):
        url = urllib.parse.urlsplit(h.path)
        path = url.path[len("/api/v3"):] if url.path.startswith("/api/v3/") else url.path
        query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
        body = self.form(h) if method == "POST" else {}
        if self.log:
            shown = {k: ("<secret>" if k == "client_secret" else v) for k, v in body.items()}
            self.log.write(json.dumps({"method": method, "path": path, "query": query,
                                       "headers": dict(h.headers.items()), "form": shown}) + "\n")
            self.log.flush()
        routes = {("GET", "/login/oauth/authorize"): self.authorize,
                  ("POST", "/login/oauth/authorize"): self.authorize,
                  ("POST", "/login/oauth/access_token"): self.access_token,
                  ("GET", "/user"): self.get_user, ("GET", "/user/emails"): self.get_emails}
        fn = routes.get((method, path))
        if not fn:
            self.send(h, 404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest",
                               "status": "404"})
            return
        fn(h, query, body)

    # ---- OAuth ----

    def authorize(self, h, q, form):
        if form:    # the consent page's form (--consent)
            q = form
        if q.get("client_id") != self.o.client_id or not q.get("redirect_uri"):
            self.send(h, 404, b"<html><body>Not Found</body></html>", "text/html; charset=utf-8")
            return
        if self.o.consent and not form.get("authorize"):
            # A first sign-in: GitHub asks the person, and the redirect back
            # is then a navigation that GitHub's page starts (cross-site).
            fields = "".join('<input type="hidden" name="%s" value="%s">' % (k, html.escape(v, quote=True))
                             for k, v in q.items())
            page = ('<!DOCTYPE html><html><body><h1>Authorize denv</h1>'
                    '<form method="post" action="/login/oauth/authorize">%s'
                    '<button id="js-oauth-authorize-btn" name="authorize" value="1" type="submit">'
                    'Authorize</button></form></body></html>') % fields
            self.send(h, 200, page.encode(), "text/html; charset=utf-8")
            return
        back = {"state": q.get("state", "")}
        if self.o.deny:
            back.update(error="access_denied", error_description="The user has denied your application access.",
                        error_uri=DOCS + "#access-denied")
        else:
            code = secrets.token_hex(10)   # GitHub's codes are 20 hex digits
            with self.lock:
                self.codes[code] = (q["client_id"], q["redirect_uri"], q.get("scope", ""), time.time() + CODE_TTL)
            back["code"] = code
        sep = "&" if "?" in q["redirect_uri"] else "?"
        self.send(h, 302, b"", "text/html; charset=utf-8",
                  {"Location": q["redirect_uri"] + sep + urllib.parse.urlencode(back)})

    def oauth_answer(self, h, fields):
        if "application/json" in (h.headers.get("Accept") or ""):
            self.send(h, 200, fields)
        else:
            self.send(h, 200, urllib.parse.urlencode(fields).encode(), "application/x-www-form-urlencoded; charset=utf-8")

    def access_token(self, h, _, f):
        if f.get("client_id") != self.o.client_id or f.get("client_secret") != self.o.client_secret:
            self.oauth_answer(h, {"error": "incorrect_client_credentials",
                                  "error_description": "The client_id and/or client_secret passed are incorrect.",
                                  "error_uri": DOCS + "#incorrect-client-credentials"})
            return
        with self.lock:
            grant = self.codes.pop(f.get("code", ""), None)
        if not grant or grant[0] != f["client_id"] or grant[3] < time.time():
            self.oauth_answer(h, {"error": "bad_verification_code",
                                  "error_description": "The code passed is incorrect or expired.",
                                  "error_uri": DOCS + "#bad-verification-code"})
            return
        if f.get("redirect_uri") and f["redirect_uri"] != grant[1]:
            self.oauth_answer(h, {"error": "redirect_uri_mismatch",
                                  "error_description": "The redirect_uri MUST match the registered callback URL for this application.",
                                  "error_uri": DOCS + "#redirect-uri-mismatch"})
            return
        token = "gho_" + secrets.token_urlsafe(27)[:36]
        scope = ",".join(s for s in grant[2].replace(",", " ").split() if s)
        with self.lock:
            self.tokens[token] = scope
        self.oauth_answer(h, {"access_token": token, "token_type": "bearer", "scope": scope})

    # ---- REST ----

    def scope_of(self, h):
        auth = h.headers.get("Authorization") or ""
        kind, _, token = auth.partition(" ")
        if not auth:
            self.send(h, 401, {"message": "Requires authentication",
                               "documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user",
                               "status": "401"})
            return None
        with self.lock:
            scope = self.tokens.get(token) if kind.lower() in ("bearer", "token") else None
        if scope is None:
            self.send(h, 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest",
                               "status": "401"})
        return scope

    def get_user(self, h, *_):
        scope = self.scope_of(h)
        if scope is not None:
            self.send(h, 200, self.user(), extra={"X-OAuth-Scopes": scope.replace(",", ", ")})

    def get_emails(self, h, *_):
        scope = self.scope_of(h)
        if scope is None:
            return
        if "user:email" not in scope.split(",") and "user" not in scope.split(","):
            self.send(h, 404, {"message": "Not Found",
                               "documentation_url": "https://docs.github.com/rest/users/emails#list-email-addresses-for-the-authenticated-user",
                               "status": "404"})
            return
        self.send(h, 200, [
            {"email": self.o.login + "@users.noreply.github.com", "primary": False, "verified": True,
             "visibility": None},
            {"email": "unverified@example.com", "primary": False, "verified": False, "visibility": None},
            {"email": self.o.email, "primary": True, "verified": True,
             "visibility": "private" if self.o.private_email else "public"},
        ])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--log")
    # Another loopback address is another site to a browser (ports are not).
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--client-id", default="Iv1.fake-client")
    p.add_argument("--client-secret", default="fake-secret")
    p.add_argument("--id", type=int, default=583231)
    p.add_argument("--login", default="octo-dev")
    p.add_argument("--name", default="Octo Dev")
    p.add_argument("--email", default="octo@example.com")
    p.add_argument("--private-email", action="store_true")
    p.add_argument("--deny", action="store_true")
    p.add_argument("--consent", action="store_true")
    opts = p.parse_args()
    fake = FakeGitHub(opts)
    with open(opts.port_file + ".tmp", "w") as f:
        f.write("%d\n" % fake.port)
    os.rename(opts.port_file + ".tmp", opts.port_file)
    try:
        fake.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
