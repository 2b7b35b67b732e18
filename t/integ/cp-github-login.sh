#!/bin/sh
# cp-github-login.sh: GitHub sign-in end to end against a fake GitHub
# (t/fakes/github.py, loopback), first checked with GitHub's own client
# (PyGithub, t/cp/github_sdk.py). Then `denv login` approved through the
# device page after "Sign in with GitHub", with curl keeping the cookies:
# the page's link, GitHub's authorize, the callback (code exchange, GET
# /user, GET /user/emails for a private address), the session cookie, the
# approval form, Approve, and the CLI's key. Also the refusals: an unknown
# state, a state carried to another browser or used twice, a code GitHub
# refuses (a page that says so, not a 502), the person saying no on GitHub,
# and the API's own return (#token=dst_...).
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/cli/lib.sh"
. "$top/t/lib/sdk-relay.sh"
if [ ! -x "$top/bin/denv" ] || [ ! -x "$top/bin/denv-cp" ]; then
	echo "1..0 # SKIP bin/denv or bin/denv-cp is not built"
	exit 0
fi
if ! "$PY" -c 'import github' 2>/dev/null; then
	echo "1..0 # SKIP PyGithub is not installed (t/requirements.txt; t/deps.sh installs it)"
	exit 0
fi
CID=Iv1.fake-client
SECRET=fake-secret

# start_github [ARGS...]: the fake on $gh_host; sets $gh (its base URL),
# logs to $tmp/gh.log.
gh_host=127.0.0.1
start_github() {
	rm -f "$tmp/gh.port"
	"$PY" "$top/t/fakes/github.py" --host "$gh_host" --port-file "$tmp/gh.port" --log "$tmp/gh.log" \
		--client-id "$CID" --client-secret "$SECRET" "$@" 2>"$tmp/gh.err" &
	pids="$pids $!"
	i=0
	while [ $i -lt 100 ] && [ ! -s "$tmp/gh.port" ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -s "$tmp/gh.port" ] || { echo "# fake GitHub did not start"; sed 's/^/#   /' "$tmp/gh.err"; return 1; }
	gh=http://$gh_host:$(cat "$tmp/gh.port")
}

# start_cp_at VAR=VALUE...: denv-cp on a port chosen first, so that its
# public URL (GitHub's redirect_uri) is where it listens; sets $server.
start_cp_at() {
	port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	server=http://127.0.0.1:$port
	: >"$tmp/cp.log"
	env DENV_PUBLIC_URL="$server" DENV_GITHUB_URL="$gh" DENV_GITHUB_API_URL="$gh/api/v3" \
		DENV_GITHUB_CLIENT_ID="$CID" DENV_GITHUB_CLIENT_SECRET="$SECRET" "$@" \
		"$top/bin/denv-cp" -addr "127.0.0.1:$port" -db "$tmp/store" -v 2>"$tmp/cp.log" &
	cppid=$!
	pids="$pids $cppid"
	i=0
	while [ $i -lt 100 ]; do
		grep -q "listening on" "$tmp/cp.log" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	echo "# denv-cp did not start:"
	sed 's/^/#   /' "$tmp/cp.log"
	return 1
}

has() { grep -qF -- "$2" "$1"; ok $? "$3"; }
code_of() { sed -n 's/.*enter the code \([A-Z0-9-]*\).*/\1/p' "$1" 2>/dev/null; }
# hop JAR URL: one request without following redirects; prints "status
# location end" (location is "end" when there is none).
hop() { curl -s -o "$tmp/hop.body" -b "$1" -c "$1" -w '%{http_code} %{redirect_url} end' "$2"; }
# query_of URL NAME
query_of() { "$PY" -c 'import sys, urllib.parse as u; print(dict(u.parse_qsl(u.urlsplit(sys.argv[1]).query)).get(sys.argv[2], ""))' "$1" "$2"; }
# gh_log PYEXPR NAME: true for some request r the fake logged.
gh_log() {
	"$PY" -c 'import json,sys
rs=[json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if any(eval(sys.argv[2]) for r in rs) else 1)' "$tmp/gh.log" "$1"
	ok $? "$2"
}
finish() {
	i=0
	while [ $i -lt "${2:-150}" ] && kill -0 "$1" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	kill "$1" 2>/dev/null
	wait "$1"
}

start_github --login octo-dev --name "Octo Dev" --email octo@example.com --private-email || exit 1

# ---- the fake, as GitHub's own client sees it ----
"$PY" "$top/t/cp/github_sdk.py" "$gh" "$CID" "$SECRET" octo-dev octo@example.com >"$tmp/sdk.out" 2>"$tmp/sdk.err"
sdk_relay "$tmp/sdk.out" $? "$tmp/sdk.err"

start_cp_at || exit 1

# ---- denv login, approved after "Sign in with GitHub" ----
"$DENV" login --no-browser --server "$server" >"$tmp/login.out" 2>"$tmp/login.err" &
lpid=$!
pids="$pids $lpid"
i=0
code=
while [ $i -lt 100 ] && [ -z "$code" ]; do
	code=$(code_of "$tmp/login.err")
	[ -n "$code" ] || sleep 0.1
	i=$((i + 1))
done
[ -n "$code" ]
ok $? "denv login prints a code ($code)"
jar=$tmp/jar
curl -s -b "$jar" -c "$jar" "$server/app/device/?code=$code" >"$tmp/p.html"
href=$(sed -n 's/.*<a id="github" href="\([^"]*\)".*/\1/p' "$tmp/p.html")
[ "$href" = "/auth/github/start?return=%2Fapp%2Fdevice%2F%3Fcode%3D$code" ]
ok $? "the device page links to GitHub sign-in with the code ($href)"
set -- $(hop "$jar" "$server$href")
[ "$1" = 302 ] && case $2 in "$gh/login/oauth/authorize?client_id=$CID&redirect_uri="*) true ;; *) false ;; esac
ok $? "start redirects to the fake's authorize page ($1 $2)"
state=$(query_of "$2" state)
[ "$(query_of "$2" redirect_uri)" = "$server/auth/github/callback" ] && [ "$(query_of "$2" scope)" = "read:user user:email" ]
ok $? "with this server's callback as redirect_uri and the scopes read:user user:email"
grep -q 'denv_oauth' "$jar" && grep '#HttpOnly_.*denv_oauth' "$jar" | grep -q '/auth/github/'
ok $? "start sets the HttpOnly browser cookie denv_oauth for /auth/github/"
set -- $(hop "$jar" "$2")
cb=$2
[ "$1" = 302 ] && case $cb in "$server/auth/github/callback?"*) true ;; *) false ;; esac && [ "$(query_of "$cb" state)" = "$state" ]
ok $? "the fake approves and sends the browser to the callback with a code and the state"
st=$(curl -s -D "$tmp/cb.h" -o "$tmp/cb.html" -b "$jar" -c "$jar" -w '%{http_code}' "$cb")
[ "$st" = 200 ] && grep -q 'id="signed-in"' "$tmp/cb.html"
ok $? "the callback signs in: 200, a signed-in page (got $st)"
[ -s "$tmp/cb.html" ] || sed 's/^/#   cp: /' "$tmp/cp.log" | tail -n 5
grep -qF "<meta http-equiv=\"refresh\" content=\"0;url=/app/device/?code=$code\">" "$tmp/cb.html" &&
	grep -qF "id=\"continue\" href=\"/app/device/?code=$code\"" "$tmp/cb.html"
ok $? "the page goes on to the device page with the code (refresh and link: same-site, so the Strict cookie goes too)"
grep -i '^set-cookie: denv_session=dst_' "$tmp/cb.h" | grep -qi 'HttpOnly; SameSite=Strict' &&
	grep -i '^set-cookie: denv_session' "$tmp/cb.h" | grep -q 'Path=/app/device/'
ok $? "the callback's answer sets the page's session cookie (HttpOnly, SameSite=Strict, /app/device/)"
! grep -q 'dst_' "$tmp/cb.html"
ok $? "the session token is not in the page"
gh_log 'r["path"] == "/login/oauth/access_token" and r["method"] == "POST" and r["headers"].get("Accept") == "application/json" and r["form"].get("client_id") == "'"$CID"'" and r["form"].get("redirect_uri") == "'"$server"'/auth/github/callback"' \
	"the code was exchanged at POST /login/oauth/access_token (Accept: application/json, the app's id, the same redirect_uri)"
gh_log 'r["path"] == "/user" and r["headers"].get("Authorization", "").startswith("Bearer gho_")' \
	"the user was read at GET /user with the access token"
gh_log 'r["path"] == "/user/emails"' "the private address was read at GET /user/emails"
! grep -q 'gho_\|fake-secret' "$tmp/cp.log"
ok $? "neither the access token nor the client secret is logged"

curl -s -b "$jar" "$server/app/device/?code=$code" >"$tmp/f.html"
grep -q 'id="approve"' "$tmp/f.html" && grep -qF '<strong id="user">octo@example.com</strong>' "$tmp/f.html"
ok $? "with the cookie the device page shows the approval form, signed in as the verified primary address"
team=$(sed -n 's/.*<option value="\(team_[^"]*\)"[^>]*>octo-dev<.*/\1/p' "$tmp/f.html" | head -n 1)
[ -n "$team" ] && grep -qF "value=\"$code\"" "$tmp/f.html"
ok $? "the form has the code and the personal team octo-dev ($team)"
fcsrf=$(sed -n 's/.*name="csrf" value="\([0-9a-f]*\)".*/\1/p' "$tmp/f.html")
st=$(curl -s -o "$tmp/a.html" -w '%{http_code}' -b "$jar" --data-urlencode user_code="$code" \
	--data-urlencode team_id="$team" --data-urlencode csrf="$fcsrf" "$server/app/device/approve")
[ "$st" = 200 ] && grep -q 'id="approved"' "$tmp/a.html"
ok $? "Approve: 200 (got $st)"
finish "$lpid"
lrc=$?
[ "$lrc" -eq 0 ] && grep -qF "Signed in to team octo-dev." "$tmp/login.out"
ok $? "denv login finishes with a key of the team octo-dev (exit $lrc)"
run whoami
is_rc 0 "whoami with the saved key"

sess=$(awk '$6 == "denv_session" {print $7}' "$jar")
curl -s -H "Authorization: Bearer $sess" "$server/v1/me" >"$tmp/out"
jq_ok 'd["user"]["Login"] == "octo-dev" and d["user"]["Name"] == "Octo Dev" and d["user"]["Email"] == "octo@example.com" and d["user"]["GitHubID"] == "583231" and [t["Name"] for t in d["teams"]] == ["octo-dev"] and d["teams"][0]["Role"] == "owner"' \
	"the session is the GitHub user's, owner of its personal team"

# ---- a second sign-in finds the same user ----
jar2=$tmp/jar2
set -- $(hop "$jar2" "$server/auth/github/start?return=%2Fapp%2Fdevice%2F")
set -- $(hop "$jar2" "$2")
st=$(curl -s -o /dev/null -b "$jar2" -c "$jar2" -w '%{http_code}' "$2")
sess2=$(awk '$6 == "denv_session" {print $7}' "$jar2")
curl -s -H "Authorization: Bearer $sess2" "$server/v1/me" >"$tmp/out"
jq_ok 'len(d["teams"]) == 1 and d["user"]["Login"] == "octo-dev"' "a second sign-in: the same user, no second team"
[ "$sess2" != "$sess" ] && [ -n "$sess2" ]
ok $? "... with a session of its own"

# ---- refusals ----
st=$(curl -s -o "$tmp/out" -w '%{http_code}' "$server/auth/github/callback?code=abc&state=st_bogus")
[ "$st" = 400 ]
ok $? "an unknown state: 400 (got $st)"
jq_ok 'd["error"] == "unknown or expired state"' "... {error: unknown or expired state}"
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -H 'Accept: text/html' "$server/auth/github/callback?code=abc&state=st_bogus")
[ "$st" = 400 ] && grep -q 'id="error".*unknown or expired state' "$tmp/p.html"
ok $? "... to a browser, as a page (got $st)"

jar3=$tmp/jar3
set -- $(hop "$jar3" "$server/auth/github/start?return=%2Fapp%2Fdevice%2F")
set -- $(hop "$tmp/nojar" "$2")
cb=$2
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' "$cb")
[ "$st" = 400 ] && grep -q 'another browser' "$tmp/p.html"
ok $? "the callback in a browser without the start's cookie: 400, another browser (got $st)"
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar3" "$cb")
[ "$st" = 400 ] && grep -q 'unknown or expired state' "$tmp/p.html"
ok $? "the state is good once: the right browser after that is refused too (got $st)"
before=$(grep -c '"path": "/login/oauth/access_token"' "$tmp/gh.log")

set -- $(hop "$jar3" "$server/auth/github/start?return=%2Fapp%2Fdevice%2F%3Fcode%3DBCDF-GHJK")
state=$(query_of "$2" state)
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar3" "$server/auth/github/callback?code=0123456789abcdef0123&state=$state")
[ "$st" = 400 ] && grep -q 'id="error".*GitHub refused the sign-in: The code passed is incorrect or expired. (bad_verification_code)' "$tmp/p.html"
ok $? "a code GitHub refuses: 400 and a page that says why, not a 502 (got $st)"
grep -qF 'id="again" href="/app/device/?code=BCDF-GHJK"' "$tmp/p.html"
ok $? "... with a way back to the page, code kept"
after=$(grep -c '"path": "/login/oauth/access_token"' "$tmp/gh.log")
[ "$after" -eq $((before + 1)) ]
ok $? "... after asking GitHub (one exchange, $before -> $after)"

set -- $(hop "$jar3" "$server/auth/github/start?return=%2Fapp%2Fdevice%2F")
state=$(query_of "$2" state)
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar3" "$server/auth/github/callback?error=access_denied&error_description=The+user+has+denied+your+application+access.&state=$state")
[ "$st" = 400 ] && grep -q 'GitHub did not sign you in: The user has denied your application access. (access_denied)' "$tmp/p.html"
ok $? "the person says no on GitHub: 400 and a page that says so (got $st)"
st=$(curl -s -o /dev/null -w '%{http_code}' "$server/auth/github/start?return=https://evil.example/")
[ "$st" = 400 ]
ok $? "start refuses a return to another site (got $st)"

# ---- the API's return (a console or a loopback page): #token= ----
jar4=$tmp/jar4
set -- $(hop "$jar4" "$server/auth/github/start?return=http%3A%2F%2Flocalhost%3A3100%2Fapp%2F")
set -- $(hop "$jar4" "$2")
set -- $(hop "$jar4" "$2")
[ "$1" = 302 ] && case $2 in http://localhost:3100/app/\#token=dst_*) true ;; *) false ;; esac
ok $? "a return outside the device page: 302 to it with #token=dst_... ($1 ${2%%#*}#...)"
tok=${2#*#token=}
curl -s -H "Authorization: Bearer $tok" "$server/v1/me" >"$tmp/out"
jq_ok 'd["user"]["Login"] == "octo-dev"' "... a working session"
! grep -q 'denv_session' "$jar4"
ok $? "... and no page cookie"

# ---- an expired state (states of 1 s on this server) ----
kill "$cppid" 2>/dev/null
wait "$cppid" 2>/dev/null
start_cp_at DENV_OAUTH_STATE_TTL_SEC=1 || exit 1
jar6=$tmp/jar6
set -- $(hop "$jar6" "$server/auth/github/start?return=%2Fapp%2Fdevice%2F")
set -- $(hop "$jar6" "$2")
cb=$2
sleep 2
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar6" "$cb")
[ "$st" = 400 ] && grep -q 'unknown or expired state' "$tmp/p.html"
ok $? "a state older than its time: 400 unknown or expired state (got $st)"

# ---- a GitHub that cannot be reached: 502, said as a page ----
kill "$cppid" 2>/dev/null
wait "$cppid" 2>/dev/null
gh_real=$gh
gh=http://127.0.0.1:1
start_cp_at || exit 1
jar5=$tmp/jar5
set -- $(hop "$jar5" "$server/auth/github/start?return=%2Fapp%2Fdevice%2F")
state=$(query_of "$2" state)
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar5" "$server/auth/github/callback?code=abc&state=$state")
[ "$st" = 502 ] && grep -q 'id="error".*GitHub could not be reached' "$tmp/p.html"
ok $? "GitHub unreachable: 502 with a page that says so (got $st)"
gh=$gh_real

# ---- a real browser: click "Sign in with GitHub", come back signed in ----
# The fake is on 127.0.0.2, another site to the browser than denv-cp on
# 127.0.0.1 (ports do not make sites), so GitHub's redirect to the callback
# is cross-site as it is in life and the SameSite=Strict cookie is put to
# the test.
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
kill "$cppid" 2>/dev/null
wait "$cppid" 2>/dev/null
if [ ! -x "$CHROMIUM" ]; then
	echo "# no $CHROMIUM: the browser part is skipped"
elif ! gh_host=127.0.0.2 start_github --id 9001 --login octo-web --name "Octo Web" --email web@example.com \
	--consent; then
	ok 1 "the fake GitHub starts on 127.0.0.2"
else
	start_cp_at || exit 1
	"$DENV" login --no-browser --server "$server" >"$tmp/bl.out" 2>"$tmp/bl.err" &
	bpid=$!
	pids="$pids $bpid"
	i=0
	bcode=
	while [ $i -lt 100 ] && [ -z "$bcode" ]; do
		bcode=$(code_of "$tmp/bl.err")
		[ -n "$bcode" ] || sleep 0.1
		i=$((i + 1))
	done
	mkdir -p "$tmp/b"
	"$PY" "$top/t/cli/device_browser.py" "$CHROMIUM" "$server/app/device/?code=$bcode" --github "$tmp/b" \
		2>"$tmp/browser.err"
	ok $? "chromium clicks Sign in with GitHub and comes back"
	sed 's/^/#   browser: /' "$tmp/browser.err" | tail -n 3
	grep -q 'id="github"' "$tmp/b/github-start.html"
	ok $? "the page it started on offers GitHub"
	grep -q 'js-oauth-authorize-btn' "$tmp/b/consent.html" 2>/dev/null
	ok $? "GitHub asked first (its Authorize button was clicked: the way back is cross-site)"
	grep -qF '<strong id="user">web@example.com</strong>' "$tmp/b/form.html" &&
		grep -qF "value=\"$bcode\"" "$tmp/b/form.html"
	ok $? "back on the device page signed in (the Strict cookie was sent), the code filled in"
	grep -q 'id="approved"' "$tmp/b/done.html" 2>/dev/null
	ok $? "a click on Approve approves"
	finish "$bpid"
	brc=$?
	[ "$brc" -eq 0 ] && grep -qF "Signed in to team octo-web." "$tmp/bl.out"
	ok $? "and that denv login finishes (exit $brc)"
fi

done_testing
