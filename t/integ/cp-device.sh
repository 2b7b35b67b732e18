#!/bin/sh
# cp-device.sh: `denv login` against a local denv-cp with dev login, approved
# through denv-cp's own device page (/app/device/) in headless Chromium: the
# prompt is on stderr while stdout is a file, the page's DOM (code field,
# team selector, approve button) and a screenshot, a real click on Approve,
# then `denv whoami` with the saved key. Also the page's refusals: unknown
# and expired codes, not signed in, another site's form, a stale form token,
# markup in the URL, and a server without browser sign-in.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/cli/lib.sh"
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$top/bin/denv" ] || [ ! -x "$top/bin/denv-cp" ]; then
	echo "1..0 # SKIP bin/denv or bin/denv-cp is not built"
	exit 0
fi
if [ ! -x "$CHROMIUM" ]; then
	echo "1..0 # SKIP no $CHROMIUM (Debian package chromium; t/deps.sh installs it)"
	exit 0
fi
start_cp DENV_DEV_LOGIN=1 || { echo "1..0 # SKIP denv-cp did not start"; exit 0; }

# has FILE TEXT NAME: fixed-string match in FILE.
has() { grep -qF -- "$2" "$1"; ok $? "$3"; }
# dom FILE PYEXPR NAME: a Python expression over the DOM dump in FILE is true
# (ids are the page's contract: #code, #team, #approve-button, #error ...).
dom() {
	"$PY" - "$1" "$2" <<'EOF' 2>"$tmp/dom.err"
import sys
from html.parser import HTMLParser

class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.text, self.stack, self.options = {}, {}, [], []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        a["tag"] = tag
        if tag == "option":
            self.options.append(a)
        if "id" in a:
            self.ids[a["id"]] = a
            self.text[a["id"]] = ""
        if tag not in ("input", "meta", "link", "br"):
            self.stack.append(a.get("id"))
    def handle_endtag(self, tag):
        if tag not in ("input", "meta", "link", "br") and self.stack:
            self.stack.pop()
    def handle_data(self, data):
        for i in self.stack:
            if i:
                self.text[i] += data

d = Dom()
d.feed(open(sys.argv[1]).read())
ids, text, options = d.ids, d.text, d.options
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
	rc=$?
	[ $rc -eq 0 ] || sed 's/^/#   dom: /' "$1" | head -n 30
	ok $rc "$3"
}
# jq_ok reads $tmp/out and prints $tmp/err on failure: keep it to one request.
jq_ok_clean() { : >"$tmp/err"; jq_ok "$@"; }
code_of() { sed -n 's/.*enter the code \([A-Z0-9-]*\).*/\1/p' "$1" 2>/dev/null; }
# finish PID [TENTHS]: wait for a login to end by itself (default 15 s), then
# stop it, so that a broken approval fails the test instead of hanging it; $?
# is the login's exit status.
finish() {
	i=0
	while [ $i -lt "${2:-150}" ] && kill -0 "$1" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	kill "$1" 2>/dev/null
	wait "$1"
}

# ---- login with stdout in a file: the prompt still reaches the person ----
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
ok $? "login prints the code on stderr while stdout is a file ($code)"
url=$(sed -n 's/^or open \(.*\)$/\1/p' "$tmp/login.err")
[ "$url" = "$server/app/device/?code=$code" ]
ok $? "the printed URL is this server's device page with the code ($url)"
has "$tmp/login.err" "To sign in, open $server/app/device/ and enter the code $code" "stderr names the page and the code"
[ ! -s "$tmp/login.out" ]
ok $? "nothing of the prompt went to stdout"

# ---- not signed in: the page says how to sign in (Chromium --dump-dom) ----
"$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/chr1" --dump-dom "$url" \
	>"$tmp/anon.html" 2>"$tmp/chr1.log"
ok $? "chromium --dump-dom loads the page"
dom "$tmp/anon.html" '"signin" in ids and ids["email"]["tag"] == "input" and "signin-button" in ids' \
	"not signed in: a sign-in form (email, button)"
dom "$tmp/anon.html" '"approve" not in ids and "team" not in ids' "not signed in: no approval form"
has "$tmp/anon.html" "$code" "the sign-in page carries the code along"
"$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/chr2" --window-size=800,700 \
	--screenshot="$tmp/anon.png" "$url" >/dev/null 2>"$tmp/chr2.log"
size=$(stat -c %s "$tmp/anon.png" 2>/dev/null || echo 0)
[ "$size" -gt 5000 ] && [ "$(head -c 4 "$tmp/anon.png" | od -An -c | tr -d ' ')" = "211PNG" ]
ok $? "chromium --screenshot of the sign-in page is a PNG ($size bytes)"

# ---- sign in and approve with real clicks (DevTools protocol) ----
mkdir -p "$tmp/b"
"$PY" "$top/t/cli/device_browser.py" "$CHROMIUM" "$url" "dev@example.com" "$tmp/b" 2>"$tmp/browser.err"
ok $? "the browser signs in and clicks Approve"
[ -s "$tmp/browser.err" ] && sed 's/^/#   browser: /' "$tmp/browser.err" | tail -n 5
dom "$tmp/b/form.html" 'ids["code"]["tag"] == "input" and ids["code"].get("value") == "'"$code"'"' \
	"the code field is prefilled with the code"
dom "$tmp/b/form.html" 'ids["team"]["tag"] == "select" and len(options) == 1 and options[0]["value"].startswith("team_") and "dev" in text["team"]' \
	"the team selector offers the user's team"
dom "$tmp/b/form.html" 'ids["approve-button"]["tag"] == "button" and text["approve-button"].strip() == "Approve" and ids["approve"]["method"] == "post"' \
	"an Approve button in a POST form"
dom "$tmp/b/form.html" 'text["user"] == "dev@example.com"' "the page says who is signed in"
size=$(stat -c %s "$tmp/b/form.png" 2>/dev/null || echo 0)
[ "$size" -gt 10000 ] && [ "$(head -c 4 "$tmp/b/form.png" | od -An -c | tr -d ' ')" = "211PNG" ]
ok $? "screenshot of the approval form is a PNG ($size bytes)"
dom "$tmp/b/done.html" '"approved" in ids and "'"$code"'" in text["approved"] and text["team-name"] == "dev"' \
	"after the click: approved, for the team, with the code"

# ---- the CLI finishes with the key ----
finish "$lpid"
lrc=$?
[ "$lrc" -eq 0 ]
ok $? "login exits 0 after the approval (got $lrc)"
has "$tmp/login.out" "Signed in to team dev. Key saved to $XDG_CONFIG_HOME/denv/config.json" "login reports the team on stdout"
run whoami
is_rc 0 "whoami with the saved credential"
jq_ok 'd["team"]["Name"] == "dev" and d["teams"][0]["Role"] == "key"' "the saved key is a key of the approved team"
! grep -q "dak_\|dst_" "$tmp/login.out" "$tmp/login.err" "$tmp/b/done.html"
ok $? "no key or session token in the output or on the page"

# ---- refusals the person sees ----
dom "$tmp/b/again.html" '"already approved" in text["notice"]' "the same code again: already approved"
dom "$tmp/b/unknown.html" '"unknown or has expired" in text["error"] and "denv login" in text["error"]' \
	"an unknown code: a clear message"
dom "$tmp/b/wrong.html" '"unknown or has expired" in text["error"] and ids["code"].get("value") == "XXXX-XXXX"' \
	"approving a mistyped code: the message, the field keeps what was typed"

# curl with a session of its own: the checks a browser would not let us make.
jar=$tmp/jar
curl -s -c "$jar" "$server/app/device/" >"$tmp/p.html"
csrf=$(sed -n 's/.*name="csrf" value="\([0-9a-f]*\)".*/\1/p' "$tmp/p.html")
[ ${#csrf} -eq 64 ]
ok $? "the sign-in form has a token"
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar" -c "$jar" --data-urlencode email=c@example.com \
	--data-urlencode csrf=0000000000000000000000000000000000000000000000000000000000000000 "$server/app/device/login")
[ "$st" = 403 ]
ok $? "sign-in with a wrong form token: 403 (got $st)"
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar" -c "$jar" -H "Origin: http://evil.example" \
	--data-urlencode email=c@example.com --data-urlencode csrf="$csrf" "$server/app/device/login")
[ "$st" = 403 ]
ok $? "sign-in posted from another origin: 403 (got $st)"
has "$tmp/p.html" "another site" "... and says so"
st=$(curl -s -o /dev/null -w '%{http_code}' -b "$jar" -c "$jar" --data-urlencode email=c@example.com \
	--data-urlencode csrf="$csrf" "$server/app/device/login")
[ "$st" = 303 ] && grep -q "denv_session" "$jar"
ok $? "sign-in with the form's token: 303 and a session cookie (got $st)"
grep -q 'denv_session.*dst_' "$jar" && ! grep -q '^[^#].*denv_session' "$jar"
ok $? "the session cookie is HttpOnly"
sess=$(awk '$6 == "denv_session" {print $7}' "$jar")
curl -s -o /dev/null -H "Authorization: Bearer $sess" -H 'Content-Type: application/json' \
	-d '{"name":"<i>ops</i> & \"co\""}' "$server/v1/teams"
curl -s -b "$jar" "$server/app/device/" >"$tmp/p.html"
grep -qF '&lt;i&gt;ops&lt;/i&gt; &amp; &quot;co&quot;</option>' "$tmp/p.html" && ! grep -q '<i>ops' "$tmp/p.html"
ok $? "a team name with markup is shown escaped in the selector"
curl -s -D "$tmp/h" -o "$tmp/p.html" -b "$jar" "$server/app/device/?code=%3Cscript%3Ealert(1)%3C/script%3E"
! grep -q "<script" "$tmp/p.html"
ok $? "markup in ?code= is never echoed"
grep -qi "^Content-Security-Policy: default-src 'none'; style-src 'self'" "$tmp/h"
ok $? "a strict Content-Security-Policy"
grep -qi '^X-Frame-Options: DENY' "$tmp/h" && grep -qi '^Cache-Control: no-store' "$tmp/h"
ok $? "no framing, no caching"
"$DENV" login --no-browser --server "$server" >"$tmp/l2.out" 2>"$tmp/l2.err" &
l2=$!
pids="$pids $l2"
i=0
code2=
while [ $i -lt 100 ] && [ -z "$code2" ]; do
	code2=$(code_of "$tmp/l2.err")
	[ -n "$code2" ] || sleep 0.1
	i=$((i + 1))
done
curl -s -b "$jar" "$server/app/device/?code=$code2" >"$tmp/f.html"
team=$(sed -n 's/.*<option value="\(team_[^"]*\)".*/\1/p' "$tmp/f.html" | head -n 1)
fcsrf=$(sed -n 's/.*name="csrf" value="\([0-9a-f]*\)".*/\1/p' "$tmp/f.html")
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar" --data-urlencode user_code="$code2" \
	--data-urlencode team_id="$team" --data-urlencode csrf="$csrf" "$server/app/device/approve")
[ "$st" = 403 ]
ok $? "approve with the sign-in token instead of the form's: 403 (got $st)"
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' --data-urlencode user_code="$code2" \
	--data-urlencode team_id="$team" --data-urlencode csrf="$fcsrf" "$server/app/device/approve")
[ "$st" = 401 ] && grep -q 'id="signin"' "$tmp/p.html"
ok $? "approve without the session cookie: 401 and the sign-in form (got $st)"
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar" --data-urlencode user_code="$code2" \
	--data-urlencode team_id="team_NOTMINE" --data-urlencode csrf="$fcsrf" "$server/app/device/approve")
[ "$st" = 403 ] && grep -q "not a member of that team" "$tmp/p.html"
ok $? "approve for a team one is not in: 403 (got $st)"
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar" --data-urlencode user_code="$code2" \
	--data-urlencode team_id="$team" --data-urlencode 'name=<b>x' --data-urlencode csrf="$fcsrf" \
	"$server/app/device/approve")
[ "$st" = 400 ] && ! grep -q "<b>x" "$tmp/p.html" && grep -q '&lt;b&gt;x' "$tmp/p.html"
ok $? "a bad key name: 400, shown escaped (got $st)"
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar" --data-urlencode user_code="$(echo "$code2" | tr A-Z a-z)" \
	--data-urlencode team_id="$team" --data-urlencode csrf="$fcsrf" "$server/app/device/approve")
[ "$st" = 200 ] && grep -q 'id="approved"' "$tmp/p.html"
ok $? "approve with the form (the code typed in lower case): 200 (got $st)"
finish "$l2"
ok $? "the second login finishes"
st=$(curl -s -o /dev/null -w '%{http_code}' "$server/app/device?code=$code2")
[ "$st" = 308 ]
ok $? "/app/device without the slash redirects (got $st)"

# Stop this script's servers; a fresh log so start_cp cannot read the old port.
kill_cp() {
	for p in $pids; do kill "$p" 2>/dev/null; done
	for p in $pids; do wait "$p" 2>/dev/null; done
	pids=
	rm -f "$tmp/cp.log"
}

# ---- an expired code (codes of 2 s on this server) ----
kill_cp
start_cp DENV_DEV_LOGIN=1 DENV_DEVICE_TTL_SEC=2 || exit 1
"$DENV" login --no-browser --server "$server" >"$tmp/l3.out" 2>"$tmp/l3.err" &
l3=$!
pids="$pids $l3"
jar=$tmp/jar3
curl -s -c "$jar" "$server/app/device/" >"$tmp/p.html"
csrf=$(sed -n 's/.*name="csrf" value="\([0-9a-f]*\)".*/\1/p' "$tmp/p.html")
curl -s -o /dev/null -b "$jar" -c "$jar" --data-urlencode email=late@example.com --data-urlencode csrf="$csrf" \
	"$server/app/device/login"
finish "$l3" 150
l3rc=$?
code3=$(code_of "$tmp/l3.err")
[ "$l3rc" -ne 0 ] && grep -q "expired" "$tmp/l3.err"
ok $? "login gives up when the code expires (exit $l3rc)"
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -b "$jar" "$server/app/device/?code=$code3")
[ "$st" = 404 ] && grep -q 'id="error".*unknown or has expired' "$tmp/p.html"
ok $? "the page says an expired code has expired (got $st)"

# ---- where the printed URL points ----
kill_cp
start_cp DENV_PUBLIC_URL=http://cp.example.test:8123/ || exit 1
curl -s -X POST "$server/v1/device/code" >"$tmp/out"
jq_ok_clean 'd["verification_uri"] == "http://cp.example.test:8123/app/device/" and d["verification_uri_complete"] == d["verification_uri"] + "?code=" + d["user_code"]' \
	"with a public URL the device page is there"
curl -s "$server/app/device/" >"$tmp/p.html"
grep -q 'id="no-signin"' "$tmp/p.html" && ! grep -q 'id="signin"' "$tmp/p.html"
ok $? "without dev login or GitHub the page says how to sign in instead of a form"
st=$(curl -s -o "$tmp/p.html" -w '%{http_code}' -d email=a@b.c "$server/app/device/login")
[ "$st" = 404 ]
ok $? "page sign-in is off without dev login (got $st)"
kill_cp
start_cp DENV_PUBLIC_URL=http://cp.example.test:8123 DENV_CONSOLE_URL=http://console.example.test || exit 1
curl -s -X POST "$server/v1/device/code" >"$tmp/out"
jq_ok_clean 'd["verification_uri"] == "http://console.example.test/app/device/"' "a console URL wins over the public URL"

# ---- GitHub sign-in configured: the page links to it, carrying the code ----
kill_cp
start_cp DENV_GITHUB_CLIENT_ID=Iv1.test DENV_GITHUB_CLIENT_SECRET=s3cret || exit 1
curl -s "$server/app/device/?code=BCDF-GHJK" >"$tmp/p.html"
href=$(sed -n 's/.*<a id="github" href="\([^"]*\)".*/\1/p' "$tmp/p.html")
[ "$href" = "/auth/github/start?return=%2Fapp%2Fdevice%2F%3Fcode%3DBCDF-GHJK" ] && ! grep -q 'id="signin"' "$tmp/p.html"
ok $? "with GitHub sign-in the page links to it with the code ($href)"
loc=$(curl -s -o /dev/null -w '%{redirect_url}' "$server$href")
case $loc in https://github.com/login/oauth/authorize\?client_id=Iv1.test*state=st_*) r=0 ;; *) r=1 ;; esac
ok $r "the link starts GitHub sign-in ($loc)"

done_testing
