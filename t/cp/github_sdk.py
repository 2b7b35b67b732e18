"""The provider's own client against t/fakes/github.py: PyGithub drives the
same calls denv-cp makes for a sign-in (authorize, the code exchange, GET
/user, GET /user/emails) and must accept every answer. Prints TAP lines
(the caller counts them): python github_sdk.py FAKE_URL CLIENT_ID SECRET LOGIN EMAIL
"""
import importlib.metadata
import sys
import urllib.parse
import os
import urllib.request

import github
from github import Auth, Github

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tap  # noqa: E402
from tap import ok  # noqa: E402

base, client_id, secret, login, email = sys.argv[1:6]
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a, **k):
        return None


# PyGithub with any base_url but api.github.com puts the OAuth pages at
# scheme://host:port/login/oauth and the API under the base's path.
g = Github(base_url=base + "/api/v3")
app = g.get_oauth_application(client_id, secret)
url = app.get_login_url(redirect_uri="http://127.0.0.1:9/cb", state="st_sdk")
ok(url.startswith(base + "/login/oauth/authorize?"), "the SDK's login URL is on the fake (%s)" % url)
try:
    urllib.request.build_opener(NoRedirect).open(url)
    loc = ""
except urllib.error.HTTPError as e:
    loc = e.headers.get("Location", "")
q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(loc).query))
ok(loc.startswith("http://127.0.0.1:9/cb?") and q.get("state") == "st_sdk" and len(q.get("code", "")) == 20,
   "authorize redirects back with a code and the state", loc)

try:
    tok = app.get_access_token(q.get("code", ""))
    ok(tok.token.startswith("gho_") and tok.type == "bearer" and "user:email" not in (tok.scope or ""),
       "get_access_token accepts the fake's answer (%s..., %s)" % (tok.token[:6], tok.type))
except Exception as e:  # noqa: BLE001 - any refusal is the failure we report
    tok = None
    ok(False, "get_access_token accepts the fake's answer", repr(e))

try:
    app.get_access_token(q.get("code", ""))
    ok(False, "a used code is refused", "accepted twice")
except github.BadCredentialsException as e:
    ok(e.data.get("error") == "bad_verification_code", "a used code: BadCredentialsException (bad_verification_code)")
try:
    g.get_oauth_application(client_id, "wrong").get_access_token("0" * 20)
    ok(False, "a wrong secret is refused", "accepted")
except github.GithubException as e:
    ok(e.data.get("error") == "incorrect_client_credentials", "a wrong secret: GithubException incorrect_client_credentials")

# A token with user:email, as denv-cp asks for, for the user and the emails.
url = app.get_login_url(redirect_uri="http://127.0.0.1:9/cb", state="s2") + "&scope=read%3Auser%20user%3Aemail"
try:
    urllib.request.build_opener(NoRedirect).open(url)
except urllib.error.HTTPError as e:
    loc = e.headers.get("Location", "")
code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(loc).query)).get("code", "")
tok = app.get_access_token(code)
ok(tok.scope == "read:user,user:email", "the token has the scopes asked for (%s)" % tok.scope)
gh = Github(base_url=base + "/api/v3", auth=Auth.Token(tok.token))
me = gh.get_user()
try:
    ok(me.login == login and me.id > 0 and me.name, "GET /user through the SDK: %s (id %d)" % (me.login, me.id))
except Exception as e:  # noqa: BLE001
    ok(False, "GET /user through the SDK", repr(e))
emails = me.get_emails()
prim = [m for m in emails if m.primary]
ok(len(prim) == 1 and prim[0].email == email and prim[0].verified and all(hasattr(m, "visibility") for m in emails),
   "GET /user/emails through the SDK: the primary verified address %s" % (prim[0].email if prim else None))
try:
    Github(base_url=base + "/api/v3", auth=Auth.Token("gho_wrong")).get_user().login
    ok(False, "a wrong token is refused", "accepted")
except github.BadCredentialsException:
    ok(True, "a wrong token: BadCredentialsException (401 Bad credentials)")
print("# PyGithub %s" % importlib.metadata.version("PyGithub"))
sys.exit(1 if tap.failed else 0)
