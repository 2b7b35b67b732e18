#!/bin/sh
# cp-observe.sh: GET /v1/envs/{env}/metrics and /logs, denv metrics and
# denv logs, against a real denv-cp and a joined denvd on real Docker
# (denv-cp(8), "METRICS AND LOGS"):
#   - metrics: the service is running with CPU time, memory (and the
#     default 4 GiB limit) and pids from its cgroups; CPU time grows after a
#     busy command; the volume's bytes grow after 3 MiB are written to it;
#   - logs: stdout and stderr apart, tail, timestamps, since, bad values;
#   - follow=true: ticks arrive in order while the container prints them,
#     and the stream ends saying so when the environment is destroyed;
#   - the CLI: denv logs (stdout to stdout, stderr to stderr, -f), denv
#     metrics (a table, --json).
# Every wait polls with a deadline; nothing asserts on wall time.
# Prints TAP; removes its containers, networks and data even on failure.
suite=cp-observe
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
fpid=
suite_cleanup() { [ -z "$fpid" ] || kill "$fpid" 2>/dev/null; }
j() { jq -r "$1" "$tmp/out"; }

echo "1..23"
if ! stack_start; then
	echo "Bail out! stack did not start"
	exit 1
fi
ticker='echo hello; echo oops >&2; i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.3; done'
api POST /v1/sandboxes "{\"image\":\"denv-test/busybox:latest\",\"cmd\":[\"sh\",\"-c\",\"$ticker\"],\"name\":\"obs\"}"
id=$(j '.environment.ID // empty')
[ "$code" = 201 ] && [ -n "$id" ]
ok $? "a sandbox that prints"

# ---- metrics ----
api GET "/v1/envs/$id/metrics"
[ "$code" = 200 ] && [ "$(j '.services[0].service')" = main ] && [ "$(j '.services[0].status')" = running ]
ok $? "metrics: 200, service main running"
[ "$(j '.services[0].memory_bytes > 0 and .services[0].pids >= 1 and .services[0].cpu_usec >= 0')" = true ]
ok $? "memory, pids and CPU time from the container's cgroups"
[ "$(j '.services[0].memory_limit_bytes')" = 4294967296 ]
ok $? "the memory limit is denvd's default 4 GiB"
cpu0=$(j '.services[0].cpu_usec')
[ "$(j '.volumes[0].name')" = work ] && [ "$(j '.storage')" = dir ]
ok $? "the volume work on the dir backend"
vol0=$(j '.volumes[0].bytes')
api POST "/v1/envs/$id/exec" '{"service":"main","cmd":["sh","-c","dd if=/dev/zero of=/work/blob bs=1048576 count=3 2>/dev/null; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"]}'
api GET "/v1/envs/$id/metrics"
[ "$(j '.volumes[0].bytes')" -ge $((vol0 + 3 * 1048576)) ]
ok $? "3 MiB written: the volume's bytes grew by at least that"
[ "$(j '.services[0].cpu_usec')" -gt "$cpu0" ]
ok $? "a busy command: CPU time grew"

# ---- logs ----
until_ok 20 sh -c "curl -s -H 'Authorization: Bearer $DENV_API_KEY' '$DENV_SERVER/v1/envs/$id/logs' | grep -q 'tick 3'"
api GET "/v1/envs/$id/logs?service=main"
[ "$code" = 200 ] && j .stdout | grep -qx hello && [ "$(j .stderr)" = oops ] && ! j .stdout | grep -q oops
ok $? "logs: stdout and stderr apart"
api GET "/v1/envs/$id/logs?tail=1"
[ "$(j .stdout | grep -c .)" = 1 ] && j .stdout | grep -q '^tick '
ok $? "tail=1: the last line only"
api GET "/v1/envs/$id/logs?tail=2&timestamps=true"
last=$(j .stdout | tail -n 1 | cut -d' ' -f1)
j .stdout | grep -q '^20[0-9-]*T[0-9:.]*Z tick '
ok $? "timestamps=true: docker's timestamp before each line"
until_ok 10 sh -c "curl -s -H 'Authorization: Bearer $DENV_API_KEY' '$DENV_SERVER/v1/envs/$id/logs?since=$last' | jq -r .stdout | grep -q tick"
api GET "/v1/envs/$id/logs?since=$last&timestamps=true"
[ "$(j .stdout | head -n 1 | cut -d' ' -f1 | tr -d '\n')" \> "$last" ] || [ "$(j .stdout | head -n 1 | cut -d' ' -f1)" = "$last" ]
ok $? "since: only lines from then on"
api GET "/v1/envs/$id/logs?tail=x"
[ "$code" = 400 ] && [ "$(j .error)" = "tail must be 0 to 100000" ]
ok $? "a bad tail: 400"
api GET "/v1/envs/$id/logs?service=nosuch"
[ "$code" = 502 ] && j .error | grep -q 'nosuch'
ok $? "an unknown service: 502 naming it"

# ---- follow ----
curl -sN -H "Authorization: Bearer $DENV_API_KEY" "$DENV_SERVER/v1/envs/$id/logs?follow=true&tail=1" >"$tmp/follow" 2>&1 &
fpid=$!
# Three lines the container printed after the stream began.
until_ok 30 sh -c "[ \$(grep -c '^tick' '$tmp/follow') -ge 4 ]"
ok $? "follow: new lines arrive while the container prints them"
nums=$(grep '^tick' "$tmp/follow" | awk '{print $2}')
[ "$(echo "$nums" | sort -n | uniq | tr '\n' ' ')" = "$(echo "$nums" | tr '\n' ' ')" ]
ok $? "in order, each once"
! grep -qx hello "$tmp/follow"
ok $? "tail=1: older lines are not repeated"

# ---- the CLI ----
denv logs -n 100000 "$id" >"$tmp/o" 2>"$tmp/e"
grep -q '^tick' "$tmp/o" && ! grep -q oops "$tmp/o" && grep -qx oops "$tmp/e"
ok $? "denv logs: stdout to stdout, stderr to stderr"
timeout 3 denv logs -f -n 1 "$id" >"$tmp/o" 2>&1
[ "$(grep -c '^tick' "$tmp/o")" -ge 2 ]
ok $? "denv logs -f keeps printing new lines"
denv metrics "$id" >"$tmp/out" 2>&1 && grep -q '^main  *running ' "$tmp/out" && grep -q '^work ' "$tmp/out" &&
	grep -q '^(all volumes) .* of a disk cap of  *- MiB$' "$tmp/out"
ok $? "denv metrics: a table of services and volumes, and the (absent) disk cap"
denv metrics --json "$id" >"$tmp/out" 2>&1 && [ "$(j '.services[0].status')" = running ]
ok $? "denv metrics --json: the server's answer"

# ---- the end ----
api DELETE "/v1/envs/$id"
stack_wait_destroyed "$id"
until_ok 15 grep -q 'denv: environment destroyed' "$tmp/follow"
ok $? "a destroyed environment ends the follow, saying so"
wait "$fpid" 2>/dev/null
fpid=
api GET "/v1/envs/$id/metrics"
[ "$code" = 409 ]
ok $? "metrics of a destroyed environment: 409"
api GET "/v1/envs/$id/logs"
[ "$code" = 409 ]
ok $? "logs of a destroyed environment: 409"
[ "$failed" = 0 ]
