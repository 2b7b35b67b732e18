#!/bin/sh
# cp-policy-docker.sh: quotas and Idempotency-Key on real Docker: denv-cp with
# a joined denvd (t/lib/stack.sh); an idempotent POST /v1/sandboxes replayed
# makes one sandbox (one container), the sandbox quota's 429, and the exec
# quota's 429 while a real command runs. Prints TAP; removes what it made.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_bins denvd denv-cp denv
suite_need_root "denvd's volumes"
suite_need_docker busybox
command -v curl >/dev/null 2>&1 || suite_skip "curl is not installed"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cp-policy-docker.XXXXXX")
. "$top/t/lib/stack.sh"
trap 'stack_stop; rm -rf "$tmp"' EXIT INT TERM

tn=0	# not n: stack.sh counts with n
ok() {
	tn=$((tn + 1))
	if [ "$1" -eq 0 ]; then echo "ok $tn - $2"; else echo "not ok $tn - $2"; fi
}
# post PATH BODY [KEY]: status in $tmp/st, body in $tmp/body, headers in $tmp/hdr.
post() {
	set -- "$1" "$2" "${3:-}"
	curl -s -o "$tmp/body" -D "$tmp/hdr" -w '%{http_code}' -X POST "$DENV_SERVER$1" \
		-H "Authorization: Bearer $DENV_API_KEY" -H 'Content-Type: application/json' \
		${3:+-H "Idempotency-Key: $3"} -d "$2" >"$tmp/st"
}
field() { stack_json "$1" <"$tmp/body"; }

DENV_MAX_SANDBOXES=2 DENV_MAX_EXEC=1
export DENV_MAX_SANDBOXES DENV_MAX_EXEC
stack_start || { echo "1..0 # SKIP the stack did not start"; exit 0; }

sbx='{"image":"denv-test/busybox","cmd":["sleep","infinity"],"timeout_sec":120}'
post /v1/sandboxes "$sbx" docker-k1
first=$(field 'd["environment"]["ID"]' 2>/dev/null)
[ "$(cat "$tmp/st")" = 201 ] && [ -n "$first" ]
ok $? "POST /v1/sandboxes with an Idempotency-Key: 201 ($first)"
post /v1/sandboxes "$sbx" docker-k1
again=$(field 'd["environment"]["ID"]' 2>/dev/null)
[ "$(cat "$tmp/st")" = 201 ] && [ "$again" = "$first" ] && grep -qi '^Idempotent-Replayed: true' "$tmp/hdr"
ok $? "the retry: 201 with the same sandbox id, replayed"
p=$(echo "$first" | tr 'A-Z' 'a-z')
[ "$(docker ps -q --filter "label=com.docker.compose.project=$p" | wc -l)" -eq 1 ]
ok $? "one container runs for it"
post /v1/sandboxes '{"image":"denv-test/busybox","cmd":["sleep","infinity"],"timeout_sec":60}' docker-k1
[ "$(cat "$tmp/st")" = 422 ] && [ "$(field 'd["error"]')" = 'Idempotency-Key "docker-k1" was used with a different request' ]
ok $? "the same key with another body: 422"

post /v1/sandboxes "$sbx"
[ "$(cat "$tmp/st")" = 201 ]
ok $? "a second sandbox (2 of 2)"
post /v1/sandboxes "$sbx"
[ "$(cat "$tmp/st")" = 429 ] && [ "$(field 'd["error"]')" = "quota exceeded: live sandboxes 2 of 2 (server default)" ]
ok $? "a third: 429 quota exceeded: live sandboxes 2 of 2 (server default)"

# The exec quota while a real command runs (sleep 3 in the container).
exec_body='{"service":"main","cmd":["sleep","3"],"timeout_sec":30}'
curl -s -o "$tmp/slow" -w '%{http_code}' -X POST "$DENV_SERVER/v1/envs/$first/exec" \
	-H "Authorization: Bearer $DENV_API_KEY" -H 'Content-Type: application/json' -d "$exec_body" >"$tmp/slow.st" &
slow=$!
i=0
until curl -s "$DENV_SERVER/v1/teams/$(curl -s "$DENV_SERVER/v1/me" -H "Authorization: Bearer $DENV_API_KEY" |
	stack_json 'd["team"]["ID"]')/quotas" -H "Authorization: Bearer $DENV_API_KEY" | stack_json 'd["use"]["exec"]' |
	grep -qx 1; do
	i=$((i + 1)); [ $i -lt 50 ] || break; sleep 0.1
done
post "/v1/envs/$first/exec" '{"service":"main","cmd":["true"]}'
[ "$(cat "$tmp/st")" = 429 ] && [ "$(field 'd["error"]')" = "quota exceeded: execs in flight 1 of 1 (server default)" ]
ok $? "an exec while another runs: 429 quota exceeded: execs in flight 1 of 1"
wait "$slow"
[ "$(cat "$tmp/slow.st")" = 200 ]
ok $? "the running one finishes: 200"
post "/v1/envs/$first/exec" '{"service":"main","cmd":["echo","hi"]}'
[ "$(cat "$tmp/st")" = 200 ] && [ "$(field 'd["stdout"]')" = hi ]
ok $? "then an exec fits again"

echo "1..$tn"
