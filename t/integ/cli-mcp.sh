#!/bin/sh
# cli-mcp.sh: denv mcp on a real stack, driven by the real mcp Python SDK
# (t/integ/mcp_client.py) over both transports: stdio (the SDK spawns
# `denv mcp`) and streamable HTTP (`denv mcp --http 127.0.0.1:0`). Each
# lists the tools, creates a busybox sandbox, execs in it, puts and gets a
# text and a binary file, snapshots, forks, and destroys both; over stdio
# it also verifies a deployed environment with a verifier (the reward). Then the
# HTTP transport's own rules with curl: GET is 405, a request without a
# session is 400, an unknown session 404, a notification 202, a foreign
# Origin 403.
suite=cli-mcp
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
suite_need_stack busybox
mcp_pid=
suite_cleanup() { [ -n "$mcp_pid" ] && kill "$mcp_pid" 2>/dev/null; :; }

# from_py LOG: the Python script's TAP lines as ours (renumbered, no plan).
from_py() {
	while IFS= read -r line; do
		case $line in
		"ok "*) ok 0 "${line#ok * - }" ;;
		"not ok "*) ok 1 "${line#not ok * - }" ;;
		"#"*) echo "$line" ;;
		esac
	done <"$1"
}

if ! stack_start; then
	echo "Bail out! stack did not start"
	exit 1
fi
# A project environment with a verifier, for the verify tool (stdio run only).
cat >"$tmp/compose.yaml" <<'EOF'
x-denv:
  agent: { service: box }
  verifier:
    image: denv-test/busybox:latest
    command: ["sh", "-c", "echo 1 > /logs/verifier/reward.txt"]
    collect: ["/home/agent/answer.txt"]
services:
  box:
    image: denv-test/busybox:latest
    user: "1000:1000"
    command: ["sleep", "infinity"]
    environment: { HOME: /home/agent }
    volumes: ["home:/home/agent"]
volumes: { home: {} }
EOF
denv project create mv >/dev/null 2>&1
denv deploy --project mv --env v1 -f "$tmp/compose.yaml" >"$tmp/deploy.log" 2>&1
ok $? "deploy mv/v1 (a verifier)" "$tmp/deploy.log"
MCP_VERIFY_ENV=mv/v1 PYTHONPATH=$top/python "$PY" "$top/t/integ/mcp_client.py" stdio "$top/bin/denv" >"$tmp/stdio.tap" 2>"$tmp/stdio.err"
prc=$?
from_py "$tmp/stdio.tap"
[ $prc = 0 ]; ok $? "the stdio client ran to its end" "$tmp/stdio.err"

"$top/bin/denv" mcp --http 127.0.0.1:0 2>"$tmp/http.err" &
mcp_pid=$!
port_of() { port=$(sed -n 's/^denv mcp: listening on port \([0-9]*\).*/\1/p' "$tmp/http.err"); [ -n "$port" ]; }
until_ok 10 port_of; ok $? "denv mcp --http says its port" "$tmp/http.err"
url=http://127.0.0.1:$port/mcp
PYTHONPATH=$top/python "$PY" "$top/t/integ/mcp_client.py" http "$url" >"$tmp/http.tap" 2>"$tmp/http.py.err"
prc=$?
from_py "$tmp/http.tap"
[ $prc = 0 ]; ok $? "the HTTP client ran to its end" "$tmp/http.py.err"

post() { # post SESSION BODY: the status in $code, the answer in $tmp/out
	code=$(curl -s -o "$tmp/out" -D "$tmp/hdr" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' ${1:+-H "Mcp-Session-Id: $1"} --data "$2" "$url")
}
code=$(curl -s -o /dev/null -w '%{http_code}' "$url")
[ "$code" = 405 ]; ok $? "GET /mcp is 405 (no server stream) (got $code)"
post "" '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
[ "$code" = 400 ]; ok $? "a request without a session is 400 (got $code)"
post mcp_nosuch '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
[ "$code" = 404 ]; ok $? "an unknown session is 404 (got $code)"
post "" '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}'
sid=$(sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: *\([^[:space:]]*\).*/\1/p' "$tmp/hdr")
[ "$code" = 200 ] && [ -n "$sid" ] && grep -q '"protocolVersion":"2025-06-18"' "$tmp/out"
ok $? "initialize issues a session and echoes a known protocol version"
post "$sid" '{"jsonrpc":"2.0","method":"notifications/initialized"}'
[ "$code" = 202 ]; ok $? "a notification is 202 (got $code)"
post "$sid" '{"jsonrpc":"2.0","id":2,"method":"nope"}'
grep -q '"code":-32601' "$tmp/out"; ok $? "an unknown method is -32601"
post "$sid" '{"jsonrpc":"2.0","id":3,'
grep -q '"code":-32700' "$tmp/out"; ok $? "malformed JSON is -32700"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Origin: http://evil.example' --data '{}' "$url")
[ "$code" = 403 ]; ok $? "a request from a foreign web origin is 403 (got $code)"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Origin: http://127.0.0.1:$port" -H "Mcp-Session-Id: $sid" \
	--data '{"jsonrpc":"2.0","id":9,"method":"ping"}' "$url")
[ "$code" = 200 ]; ok $? "one from a loopback origin is served (got $code)"
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Mcp-Session-Id: $sid" "$url")
post "$sid" '{"jsonrpc":"2.0","id":4,"method":"ping"}'
[ "$code" = 404 ]; ok $? "DELETE ends the session"
suite_done
