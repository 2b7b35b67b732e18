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

The GitHub App side (push to deploy, src/cp/gh_app.c and gh_deploy.c),
in the shapes of GitHub's REST documentation ("Apps", "Repositories",
"Branches", "Contents: download a repository archive (tar)", "Check runs")
as PyGithub 2.10.0 reads them (github/GithubIntegration.py
get_access_token, which reads token, expires_at, permissions and
repository_selection; github/Repository.py get_branch, get_archive_link,
create_check_run; github/CheckRun.py edit; github/Installation.py
get_repos, which pages /installation/repositories):

  POST  /app/installations/{id}/access_tokens   Bearer <the App's JWT>: RS256,
        checked against --app-key's public half, iss the --app-id, exp no
        more than ten minutes ahead. 201 {token: "ghs_...", expires_at,
        permissions, repository_selection}; a bad JWT 401 "A JSON web token
        could not be decoded"; an unknown installation 404.
  GET   /installation/repositories?per_page&page   {total_count, repositories}
  GET   /repos/{o}/{r}                 the repository (default_branch, private)
  GET   /repos/{o}/{r}/branches/{b}    {name, commit: {sha}}; 404 "Branch not found"
  GET   /repos/{o}/{r}/tarball/{ref}   302 to /_codeload/{o}/{r}/legacy.tar.gz/{sha}?token=...,
        which serves the commit as GitHub does: gzip, a pax global header
        with comment=<sha>, every entry under {o}-{r}-{sha[:7]}/.
  POST  /repos/{o}/{r}/check-runs      201 the check run; 403 "Resource not
        accessible by integration" with --no-checks
  PATCH /repos/{o}/{r}/check-runs/{id} 200 the check run
  GET   /repos/{o}/{r}/check-runs/{id} and /repos/{o}/{r}/commits/{sha}/check-runs
  Tokens: "Authorization: token T" or "Bearer T" with a ghs_ token of an
  installation that holds the repository; otherwise 401 / 404.

Test control (not GitHub's): POST /_fake/commit {repo, branch, files: {path:
text}, symlinks?: {path: target}} makes a commit on the branch (the
repository and the installation's access to it on first use) and answers {sha}.

The API is served at / and at /api/v3 (GitHub Enterprise's layout, which
PyGithub uses for any base_url but api.github.com). Each request is logged
as one JSON line (method, path, headers, form) to --log.

Run: python3 t/fakes/github.py --port-file F [--host 127.0.0.2] [--log F] [--client-id ID]
[--client-secret S] [--id N] [--login L] [--name N] [--email E] [--private-email] [--deny] [--consent]
[--app-id N --app-key PEM_FILE] [--installation ID] [--no-checks]
"""
import argparse
import datetime
import gzip
import hashlib
import html
import io
import re
import tarfile
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
TOKEN_TTL = 3600        # an installation token lives an hour
JWT_MAX_LIFE = 600      # GitHub refuses an App JWT whose exp is further ahead


class FakeGitHub:
    def __init__(self, opts):
        self.o = opts
        self.codes = {}    # code -> (client_id, redirect_uri, scope, expires)
        self.tokens = {}   # token -> scope
        self.lock = threading.Lock()
        self.repos = {}       # full_name -> {id, default_branch, private, branches: {b: sha}, commits: {sha: (files, links)}}
        self.app_tokens = {}  # ghs_ token -> (installation id, expires)
        self.check_runs = {}  # id -> check run
        self.codeload = {}    # one-time token in the codeload URL -> (repo, sha)
        self.pubkey = None
        if opts.app_key:
            from cryptography.hazmat.primitives import serialization
            with open(opts.app_key, "rb") as f:
                self.pubkey = serialization.load_pem_private_key(f.read(), None).public_key()
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

            def do_PATCH(self):
                fake.handle(self, "PATCH")

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
        body = self.form(h) if method in ("POST", "PATCH") else {}
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
            for (m, pattern), f in self.app_routes():
                g = re.fullmatch(pattern, path)
                if m == method and g:
                    f(h, query, body, *g.groups())
                    return
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

    # ---- the App ----

    def app_routes(self):
        repo = r"/repos/([^/]+/[^/]+)"
        return [(("POST", r"/app/installations/(\d+)/access_tokens"), self.access_tokens),
                (("GET", r"/app/installations/(\d+)"), self.get_installation),
                (("GET", r"/installation/repositories"), self.installation_repos),
                (("GET", repo), self.get_repo),
                (("GET", repo + r"/branches/(.+)"), self.get_branch),
                (("GET", repo + r"/tarball/(.+)"), self.tarball),
                (("GET", r"/_codeload/([^/]+/[^/]+)/legacy\.tar\.gz/([0-9a-f]+)"), self.codeload_get),
                (("POST", repo + r"/check-runs"), self.check_create),
                (("PATCH", repo + r"/check-runs/(\d+)"), self.check_edit),
                (("GET", repo + r"/check-runs/(\d+)"), self.check_get),
                (("GET", repo + r"/commits/([0-9a-f]+)/check-runs"), self.check_list),
                (("POST", r"/_fake/commit"), self.fake_commit)]

    def message(self, h, status, msg, doc="https://docs.github.com/rest"):
        self.send(h, status, {"message": msg, "documentation_url": doc, "status": str(status)})

    def base(self, h):
        return "http://%s" % h.headers.get("Host")

    def get_installation(self, h, _q, _b, inst):
        if self.app_jwt_ok(h, inst):
            self.send(h, 200, {"id": int(inst), "account": {"login": self.o.login, "id": self.o.id, "type": "User"},
                               "app_id": int(self.o.app_id), "target_type": "User", "repository_selection": "all",
                               "permissions": {"contents": "read", "metadata": "read", "checks": "write"},
                               "events": ["push"], "created_at": "2026-01-01T00:00:00Z",
                               "updated_at": "2026-01-01T00:00:00Z"})

    def access_tokens(self, h, _q, _b, inst):
        if not self.app_jwt_ok(h, inst):
            return
        token = "ghs_" + secrets.token_urlsafe(27)[:36]
        expires = time.time() + TOKEN_TTL
        with self.lock:
            self.app_tokens[token] = (int(inst), expires)
        self.send(h, 201, {"token": token, "expires_at": iso(expires),
                           "permissions": {"contents": "read", "metadata": "read", "checks": "write"},
                           "repository_selection": "all"})

    def app_jwt_ok(self, h, inst):
        """The request carries the App's JWT and names its installation; else answered."""
        import jwt
        auth = h.headers.get("Authorization") or ""
        kind, _, tok = auth.partition(" ")
        try:
            if kind.lower() != "bearer" or not self.pubkey:
                raise jwt.InvalidTokenError("no bearer JWT")
            claims = jwt.decode(tok, self.pubkey, algorithms=["RS256"], options={"require": ["iat", "exp", "iss"]})
            if str(claims["iss"]) != str(self.o.app_id) or claims["exp"] - time.time() > JWT_MAX_LIFE:
                raise jwt.InvalidTokenError("iss or exp")
        except jwt.PyJWTError:
            self.message(h, 401, "A JSON web token could not be decoded",
                         "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app")
            return False
        if int(inst) != self.o.installation:
            self.message(h, 404, "Not Found")
            return False
        return True

    def installation_of(self, h):
        """The installation of the request's ghs_ token, or None after a 401."""
        kind, _, tok = (h.headers.get("Authorization") or "").partition(" ")
        with self.lock:
            got = self.app_tokens.get(tok) if kind.lower() in ("bearer", "token") else None
        if not got or got[1] < time.time():
            self.message(h, 401, "Bad credentials")
            return None
        return got[0]

    def repo_of(self, h, name):
        if self.installation_of(h) is None:
            return None
        r = self.repos.get(name)
        if not r:
            self.message(h, 404, "Not Found")
        return r

    def repo_json(self, h, name, r):
        owner, short = name.split("/")
        return {"id": r["id"], "node_id": "R_kgDO%d" % r["id"], "name": short, "full_name": name,
                "private": r["private"], "owner": {"login": owner, "id": 1000 + r["id"], "type": "User"},
                "html_url": "https://github.com/" + name, "url": self.base(h) + "/api/v3/repos/" + name,
                "default_branch": r["default_branch"], "visibility": "private" if r["private"] else "public",
                "archived": False, "fork": False}

    def installation_repos(self, h, q, *_):
        if self.installation_of(h) is None:
            return
        per, page = min(int(q.get("per_page", 30)), 100), int(q.get("page", 1))
        names = sorted(self.repos)
        chunk = names[(page - 1) * per:page * per]
        self.send(h, 200, {"total_count": len(names), "repository_selection": "all",
                           "repositories": [self.repo_json(h, n, self.repos[n]) for n in chunk]})

    def get_repo(self, h, _q, _b, name):
        r = self.repo_of(h, name)
        if r:
            self.send(h, 200, self.repo_json(h, name, r))

    def get_branch(self, h, _q, _b, name, branch):
        r = self.repo_of(h, name)
        if not r:
            return
        sha = r["branches"].get(urllib.parse.unquote(branch))
        if not sha:
            self.message(h, 404, "Branch not found", "https://docs.github.com/rest/branches/branches#get-a-branch")
            return
        self.send(h, 200, {"name": branch, "commit": {"sha": sha, "url": "%s/api/v3/repos/%s/commits/%s"
                                                     % (self.base(h), name, sha)}, "protected": False})

    def tarball(self, h, _q, _b, name, ref):
        r = self.repo_of(h, name)
        if not r:
            return
        sha = r["branches"].get(ref, ref if ref in r["commits"] else None)
        if not sha:
            self.message(h, 404, "Not Found")
            return
        one = secrets.token_hex(8)
        with self.lock:
            self.codeload[one] = (name, sha)
        self.send(h, 302, b"", "text/html; charset=utf-8",
                  {"Location": "%s/_codeload/%s/legacy.tar.gz/%s?token=%s" % (self.base(h), name, sha, one)})

    def codeload_get(self, h, q, _b, name, sha):
        with self.lock:
            ok = self.codeload.get(q.get("token", "")) == (name, sha)
        if not ok or h.headers.get("Authorization"):
            # codeload takes the URL's token only, as the redirect hands it over.
            self.send(h, 404, b"Not Found", "text/plain")
            return
        files, links = self.repos[name]["commits"][sha]
        top = "%s-%s/" % (name.replace("/", "-"), sha[:7])
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": sha}) as tf:
            d = tarfile.TarInfo(top)
            d.type, d.mode = tarfile.DIRTYPE, 0o775
            tf.addfile(d)
            for path, text in sorted(files.items()):
                data = text.encode()
                ti = tarfile.TarInfo(top + path)
                ti.size, ti.mode = len(data), 0o664
                tf.addfile(ti, io.BytesIO(data))
            for path, target in sorted(links.items()):
                ti = tarfile.TarInfo(top + path)
                ti.type, ti.linkname = tarfile.SYMTYPE, target
                tf.addfile(ti)
        self.send(h, 200, gzip.compress(raw.getvalue()), "application/x-gzip",
                  {"Content-Disposition": "attachment; filename=%s-%s.tar.gz" % (name.replace("/", "-"), sha[:7])})

    def check_json(self, h, name, c):
        return dict(c, url="%s/api/v3/repos/%s/check-runs/%d" % (self.base(h), name, c["id"]),
                    html_url="https://github.com/%s/runs/%d" % (name, c["id"]))

    def check_create(self, h, _q, b, name):
        r = self.repo_of(h, name)
        if not r:
            return
        if self.o.no_checks:
            self.message(h, 403, "Resource not accessible by integration",
                         "https://docs.github.com/rest/checks/runs#create-a-check-run")
            return
        if not b.get("name") or b.get("head_sha") not in r["commits"]:
            self.send(h, 422, {"message": "Validation Failed", "errors": [{"resource": "CheckRun", "code": "invalid"}],
                               "documentation_url": "https://docs.github.com/rest/checks/runs#create-a-check-run",
                               "status": "422"})
            return
        with self.lock:
            cid = 4000 + len(self.check_runs) + 1
            c = {"id": cid, "node_id": "CR_%d" % cid, "head_sha": b["head_sha"], "name": b["name"],
                 "status": b.get("status", "queued"), "conclusion": b.get("conclusion"),
                 "started_at": b.get("started_at"), "completed_at": b.get("completed_at"),
                 "details_url": b.get("details_url"), "external_id": b.get("external_id", ""),
                 "output": dict({"title": None, "summary": None, "text": None, "annotations_count": 0},
                                **b.get("output", {})),
                 "app": {"id": int(self.o.app_id or 0), "slug": "denv"}, "repo": name}
            self.check_runs[cid] = c
        self.send(h, 201, self.check_json(h, name, c))

    def check_edit(self, h, _q, b, name, cid):
        if not self.repo_of(h, name):
            return
        with self.lock:
            c = self.check_runs.get(int(cid))
            if c and c["repo"] == name:
                for k in ("name", "status", "conclusion", "started_at", "completed_at", "details_url", "external_id"):
                    if k in b:
                        c[k] = b[k]
                if "output" in b:
                    c["output"].update(b["output"])
                if c.get("conclusion") and "status" not in b:
                    c["status"] = "completed"
        if not c or c["repo"] != name:
            self.message(h, 404, "Not Found")
            return
        self.send(h, 200, self.check_json(h, name, c))

    def check_get(self, h, _q, _b, name, cid):
        if not self.repo_of(h, name):
            return
        c = self.check_runs.get(int(cid))
        if not c or c["repo"] != name:
            self.message(h, 404, "Not Found")
            return
        self.send(h, 200, self.check_json(h, name, c))

    def check_list(self, h, _q, _b, name, sha):
        if not self.repo_of(h, name):
            return
        runs = [self.check_json(h, name, c) for c in self.check_runs.values() if c["repo"] == name and c["head_sha"] == sha]
        self.send(h, 200, {"total_count": len(runs), "check_runs": runs})

    def fake_commit(self, h, _q, b):
        name, branch = b["repo"], b.get("branch", "main")
        files, links = b.get("files", {}), b.get("symlinks", {})
        sha = hashlib.sha1(json.dumps([name, branch, files, links, time.time()]).encode()).hexdigest()
        with self.lock:
            r = self.repos.setdefault(name, {"id": 700 + len(self.repos), "default_branch": branch,
                                             "private": bool(b.get("private")), "branches": {}, "commits": {}})
            r["commits"][sha] = (files, links)
            r["branches"][branch] = sha
        self.send(h, 201, {"sha": sha})


def iso(t):
    return datetime.datetime.fromtimestamp(int(t), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    p.add_argument("--app-id", default="")
    p.add_argument("--app-key", help="the App's private key (PEM); the fake checks JWTs with its public half")
    p.add_argument("--installation", type=int, default=0)
    p.add_argument("--no-checks", action="store_true", help="the App lacks Checks: write (403 on check runs)")
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
