#!/bin/sh
# cp-github-deploy.sh: push-to-deploy against a fake GitHub (t/fakes/github.py,
# loopback), with a real denv-cp and a joined denvd on real Docker
# (push-to-deploy.md, denv-cp(8) "GitHub App"). First PyGithub checks the
# fake's App routes (t/cp/github_app_sdk.py). Then through denv-cp's API:
#   - an unsigned or wrongly signed webhook is a 401;
#   - an installation event, then its link to the team; GET /v1/github/repos;
#   - a signed push to the default branch: denv-cp takes an installation
#     token with its JWT, fetches the tarball at the sha (a redirect to
#     codeload), reads docker-compose.yaml and deploys alpha; the check run
#     named denv ends success with details_url on the deployment's page;
#     the sha is recorded with the deployment and as LastDeployedSHA;
#   - a push to another branch is skipped, with the reason;
#   - a compose file refused at resolve: no deployment, the check run fails
#     with the reason; one whose image does not exist: a deployment that
#     fails, and a check run that says failure;
#   - a compose path that is a symlink in the repository is refused;
#   - deploy-from-source deploys the default branch's head to alpha.
# Every wait polls with a deadline; nothing asserts on wall time.
suite=cp-github-deploy
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
. "$top/t/lib/sdk-relay.sh"
suite_need_stack busybox
if ! "$PY" -c 'import github, jwt, cryptography' 2>/dev/null; then
	echo "1..0 # SKIP PyGithub is not installed (t/requirements.txt; t/deps.sh installs it)"
	exit 0
fi

APP=4242
INST=77
REPO=octo/ops
SECRET=whsec_test
CONSOLE=http://console.test

gh_pid=
suite_cleanup() { [ -n "$gh_pid" ] && kill "$gh_pid" 2>/dev/null; }

j() { jq -r "$1" "$tmp/out"; }
# commit BRANCH COMPOSE_TEXT [EXTRA_JSON]: a commit on the fake; its sha in $sha.
commit() {
	body=$(jq -n --arg r "$REPO" --arg b "$1" --arg c "$2" '{repo:$r, branch:$b, files:{"docker-compose.yaml":$c}}')
	[ -n "${3:-}" ] && body=$(echo "$body" | jq "$3")
	sha=$(curl -s -X POST -H 'Content-Type: application/json' --data "$body" "$gh/_fake/commit" | jq -r .sha)
}
# hook EVENT BODY [SECRET]: a webhook signed with SECRET (default: the server's).
hook() {
	sig=$(printf '%s' "$2" | openssl dgst -sha256 -hmac "${3:-$SECRET}" -r | cut -d' ' -f1)
	code=$(curl -s -o "$tmp/out" -w '%{http_code}' -X POST -H "X-GitHub-Event: $1" \
		-H "X-Hub-Signature-256: sha256=$sig" -H 'Content-Type: application/json' --data "$2" \
		"$DENV_SERVER/webhooks/github")
}
push() {
	hook push "$(jq -cn --arg ref "refs/heads/$1" --arg sha "$2" --arg r "$REPO" --argjson i "$INST" \
		'{ref:$ref, after:$sha, deleted:false, repository:{full_name:$r, default_branch:"main"}, installation:{id:$i}}')"
}
# dep_status DEP: the deployment's status.
dep_status() { curl -s -H "Authorization: Bearer $DENV_API_KEY" "$DENV_SERVER/v1/deployments/$1" | jq -r .deployment.Status; }
dep_done() { s=$(dep_status "$1"); [ "$s" != pending ] && [ "$s" != running ]; }
# check_of SHA: the denv check run on the commit, as GitHub has it, into $tmp/check.
check_of() {
	curl -s -H "Authorization: token $ghs" "$gh/api/v3/repos/$REPO/commits/$1/check-runs" |
		jq '[.check_runs[] | select(.name == "denv")] | last' >"$tmp/check"
}
check_done() { check_of "$1" && [ "$(jq -r .status "$tmp/check")" = completed ]; }

openssl genrsa -out "$tmp/app.pem" 2048 2>/dev/null
"$PY" "$top/t/fakes/github.py" --port-file "$tmp/gh.port" --app-id "$APP" --app-key "$tmp/app.pem" \
	--installation "$INST" --log "$tmp/gh.log" 2>"$tmp/gh.err" &
gh_pid=$!
until_ok 20 test -s "$tmp/gh.port" || { echo "Bail out! the fake GitHub did not start"; exit 1; }
gh=http://127.0.0.1:$(cat "$tmp/gh.port")

commit main "services:
  web:
    image: denv-test/busybox:latest
    command: [\"sleep\", \"3600\"]
"
good=$sha

# ---- the fake, as GitHub's own client sees it ----
"$PY" "$top/t/cp/github_app_sdk.py" "$gh" "$APP" "$tmp/app.pem" "$INST" "$REPO" "$good" >"$tmp/sdk.out" 2>"$tmp/sdk.err"
sdk_relay "$tmp/sdk.out" $? "$tmp/sdk.err"
# A token of our own for reading check runs as GitHub has them.
ghs=$("$PY" -c 'import sys
from github import Auth, GithubIntegration
print(GithubIntegration(auth=Auth.AppAuth(int(sys.argv[2]), open(sys.argv[3]).read()), base_url=sys.argv[1] + "/api/v3").get_access_token(int(sys.argv[4])).token)' \
	"$gh" "$APP" "$tmp/app.pem" "$INST")

export DENV_GITHUB_APP_ID=$APP DENV_GITHUB_APP_PRIVATE_KEY=$tmp/app.pem DENV_GITHUB_WEBHOOK_SECRET=$SECRET
export DENV_GITHUB_API_URL=$gh/api/v3 DENV_CONSOLE_URL=$CONSOLE
stack_start || { echo "Bail out! the stack did not start"; exit 1; }

# ---- webhooks, the installation, repositories ----
hook ping '{"zen":"hi"}' wrong-secret
[ "$code" = 401 ]
ok $? "a webhook signed with another secret: 401 ($code)"
hook installation "{\"action\":\"created\",\"installation\":{\"id\":$INST,\"account\":{\"login\":\"octo\"}}}"
[ "$code" = 200 ]
ok $? "the installation event is taken ($code)"
api POST "/v1/github/installations/$INST/link"
[ "$code" = 200 ] && [ "$(j .installation.InstallationID)" = "$INST" ]
ok $? "the installation is linked to the team ($code)"
api GET "/v1/github/repos?installation=$INST"
[ "$code" = 200 ] && [ "$(j '.repos[0].full_name')" = "$REPO" ] && [ "$(j '.repos[0].default_branch')" = main ]
ok $? "GET /v1/github/repos lists the installation's repository ($code)"
api POST /v1/projects "{\"name\":\"ops\",\"source\":\"github:$REPO\"}"
[ "$code" = 201 ]
ok $? "a project with source github:$REPO ($code)"

# ---- a push to the default branch deploys alpha ----
push main "$good"
dep=$(j '.projects[0].deployment // empty')
[ "$code" = 200 ] && [ -n "$dep" ] && [ "$(j '.projects[0].env')" = alpha ] && [ "$(j .sha)" = "$good" ]
ok $? "a signed push to main deploys alpha ($code, $dep)"
until_ok 180 dep_done "$dep"
[ "$(dep_status "$dep")" = succeeded ]
ok $? "the deployment succeeds ($(dep_status "$dep"))"
until_ok 30 check_done "$good"
[ "$(jq -r .conclusion "$tmp/check")" = success ] &&
	[ "$(jq -r .details_url "$tmp/check")" = "$CONSOLE/app/deployment/?id=$dep" ]
ok $? "the check run ends success and links to the deployment's phase log" "$tmp/check"
api GET "/v1/deployments/$dep"
[ "$(j .deployment.Params.source.sha)" = "$good" ]
ok $? "the sha is recorded with the deployment"
api GET /v1/projects/ops/source
[ "$(j .source.LastDeployedSHA)" = "$good" ]
ok $? "the source's LastDeployedSHA is the pushed sha"
grep -q '"path": "/app/installations/77/access_tokens"' "$tmp/gh.log" &&
	grep -q '"path": "/_codeload/' "$tmp/gh.log"
ok $? "denv-cp took an installation token and followed the tarball's redirect"

# ---- another branch is skipped ----
commit feature/x "services: {}"
push feature/x "$sha"
[ "$code" = 200 ] && [ -z "$(j '.projects[0].deployment // empty')" ] &&
	j '.projects[0].skipped' | grep -q 'not the default branch (main): no environment feature-x exists and deploy_branches is off'
ok $? "a push to feature/x is skipped with the reason"

# ---- a compose file refused at resolve: no deployment, the check run fails ----
commit main "services:
  web:
    image: denv-test/busybox:latest
    cap_add: [\"\"]
    bogus_key: 1
"
bad=$sha
push main "$bad"
[ "$code" = 200 ] && [ -z "$(j '.projects[0].deployment // empty')" ] && [ -n "$(j '.projects[0].error // empty')" ]
ok $? "a compose file refused at resolve makes no deployment ($(j '.projects[0].error'))"
until_ok 30 check_done "$bad"
[ "$(jq -r .conclusion "$tmp/check")" = failure ] && jq -r .output.summary "$tmp/check" | grep -q docker-compose.yaml
ok $? "its check run fails with the reason" "$tmp/check"

# ---- a compose whose image is not there: the deployment fails, so does the check ----
commit main "services:
  web:
    image: denv-test/nosuch-image:latest
"
miss=$sha
push main "$miss"
dep2=$(j '.projects[0].deployment // empty')
[ -n "$dep2" ]
ok $? "a compose with a missing image is deployed ($dep2)"
until_ok 180 dep_done "$dep2"
s=$(dep_status "$dep2")
[ "$s" = failed ] || [ "$s" = rolled_back ]
ok $? "that deployment does not succeed ($s)"
until_ok 30 check_done "$miss"
[ "$(jq -r .conclusion "$tmp/check")" = failure ] &&
	[ "$(jq -r .details_url "$tmp/check")" = "$CONSOLE/app/deployment/?id=$dep2" ]
ok $? "its check run ends failure with the link" "$tmp/check"

# ---- a compose path that is a link is not followed ----
commit main "unused" '.files = {"real.yaml": "services: {}"} | .symlinks = {"docker-compose.yaml": "../../etc/passwd"}'
push main "$sha"
j '.projects[0].error' | grep -q 'is a link in the repository'
ok $? "a docker-compose.yaml that is a symlink is refused ($(j '.projects[0].error'))"

# ---- deploy-from-source: the default branch's head ----
commit main "services:
  web:
    image: denv-test/busybox:latest
    command: [\"sleep\", \"3600\"]
"
head=$sha
api POST /v1/projects/ops/deploy-from-source '{}'
dep3=$(j '.deployment.ID // empty')
[ "$code" = 202 ] && [ "$(j .branch)" = main ] && [ "$(j .env)" = alpha ] && [ -n "$dep3" ]
ok $? "deploy-from-source deploys main to alpha ($code)"
until_ok 180 dep_done "$dep3"
[ "$(dep_status "$dep3")" = succeeded ] && [ "$(curl -s -H "Authorization: Bearer $DENV_API_KEY" \
	"$DENV_SERVER/v1/deployments/$dep3" | jq -r .deployment.Params.source.sha)" = "$head" ]
ok $? "it succeeds, from the branch's head ($head)"
api POST /v1/projects/ops/deploy-from-source '{"branch":"nosuch"}'
[ "$code" = 409 ]
ok $? "a branch GitHub does not have: 409 ($code: $(j .error))"

suite_done
