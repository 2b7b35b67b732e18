"""The provider's own client against the App side of t/fakes/github.py:
PyGithub makes the calls denv-cp makes for push-to-deploy (the App's JWT
for an installation token, the installation's repositories, a branch's
head, the tarball link, a check run created and completed) and must accept
every answer. Prints TAP lines (the caller counts them):
python github_app_sdk.py FAKE_URL APP_ID KEY_FILE INSTALLATION REPO SHA
"""
import gzip
import importlib.metadata
import io
import os
import sys
import tarfile
import urllib.request

import github
from github import Auth, Github, GithubIntegration

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tap  # noqa: E402
from tap import ok  # noqa: E402

base, app_id, key_file, inst, repo_name, sha = sys.argv[1:7]
api = base + "/api/v3"
key = open(key_file).read()

gi = GithubIntegration(auth=Auth.AppAuth(int(app_id), key), base_url=api)
tok = gi.get_access_token(int(inst))
ok(tok.token.startswith("ghs_") and tok.expires_at is not None and tok.permissions.get("checks") == "write",
   "GithubIntegration.get_access_token takes the fake's token (expires %s)" % tok.expires_at)
try:
    GithubIntegration(auth=Auth.AppAuth(int(app_id) + 1, key), base_url=api).get_access_token(int(inst))
    ok(False, "a JWT from another App is refused", "accepted")
except github.GithubException as e:
    ok(e.status == 401, "a JWT for another App id: 401 (%s)" % e.data.get("message"))

g = Github(base_url=api, auth=Auth.Token(tok.token))
# Installation.get_repos pages /installation/repositories with an installation token.
found = gi.get_app_installation(int(inst))
repos = [x.full_name for x in found.get_repos()]
ok(found.id == int(inst) and repo_name in repos, "Installation.get_repos lists %s" % repo_name, repos)

r = g.get_repo(repo_name)
ok(r.default_branch == "main" and r.private in (True, False), "get_repo: default_branch %s" % r.default_branch)
b = r.get_branch("main")
ok(b.commit.sha == sha, "get_branch(main): the head is the commit made (%s)" % b.commit.sha[:12])
try:
    r.get_branch("nosuch")
    ok(False, "an unknown branch is a 404", "found")
except github.UnknownObjectException:
    ok(True, "an unknown branch: UnknownObjectException (404)")

link = r.get_archive_link("tarball", sha)
ok("/_codeload/" in link and "token=" in link, "get_archive_link follows nothing and gives the codeload URL")
data = urllib.request.urlopen(link).read()
with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tf:
    names = tf.getnames()
    comment = tf.pax_headers.get("comment")
ok(comment == sha and all(n.startswith(repo_name.replace("/", "-") + "-" + sha[:7]) for n in names),
   "the tarball: pax comment is the sha, entries under owner-repo-sha7/ (%d entries)" % len(names))

run = r.create_check_run(name="denv", head_sha=sha, status="in_progress",
                         output={"title": "denv: deploying", "summary": "..."})
ok(run.id > 0 and run.status == "in_progress", "create_check_run: %d in_progress" % run.id)
run.edit(status="completed", conclusion="success", details_url="http://console.test/app/deployment/?id=dep_x",
         output={"title": "denv: deployed", "summary": "ok"})
again = r.get_check_run(run.id)
ok(again.conclusion == "success" and again.details_url.endswith("dep_x"), "CheckRun.edit completes it: %s" % again.conclusion)
print("# PyGithub %s" % importlib.metadata.version("PyGithub"))
sys.exit(1 if tap.failed else 0)
