#!/bin/sh
# cli-fake.sh: the host-dependent commands (fork, snapshot, verify,
# rollback, exec, files put|get, deployment watch, --wait over the live
# stream and by polling) against t/cli/fake_cp.py, a FAKE control plane that
# answers in api.md's shapes, until denv-cp serves these routes with a host.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/cli/lib.sh"
if [ ! -x "$top/bin/denv" ]; then
	echo "1..0 # SKIP bin/denv is not built"
	exit 0
fi
stats() { "$PY" -c 'import json,sys,urllib.request; d=json.load(urllib.request.urlopen(sys.argv[1]+"/_stats")); print(eval(sys.argv[2]))' "$server" "$1"; }

# ---- with the live event stream ----
start_fake --ws || { echo "1..0 # SKIP fake server did not start"; exit 0; }
export DENV_SERVER=$server DENV_API_KEY=dak_fake

run fork q/alpha --name f1
is_rc 0 "fork q/alpha --name f1 (flag after the environment)"
head -n 1 "$tmp/out" | grep -q '^deployment dep_fork_[0-9]* (environment env_fork_[0-9]*)$'
ok $? "first line: the deployment and the new environment"
grep -q '^  clone      ok' "$tmp/out"
ok $? "one line per phase change"
[ "$(grep -c '^  place ' "$tmp/out")" -le 2 ]
ok $? "a phase is printed only when it changes"
tail -n 1 "$tmp/out" | grep -q '^deployment dep_fork_[0-9]*: succeeded$'
ok $? "last line: deployment <id>: succeeded"
[ "$(stats 'd["ws"]')" -ge 1 ]
ok $? "--wait used the live event stream"
[ "$(stats 'd["last_fork"]["name"]')" = f1 ]
ok $? "fork sent the name"

run fork env_alpha
is_rc 0 "fork <id> with the default name"
stats 'd["last_fork"]["name"]' | grep -q '^alpha-fork-[0-9]*$'
ok $? "default name <env>-fork-<time>"

run verify q/alpha
is_rc 0 "verify"
tail -n 1 "$tmp/out" | grep -qx 'reward: 1 (source: reward.txt)'
ok $? "verify prints the reward and source last"
tail -n 2 "$tmp/out" | head -n 1 | grep -q '^deployment dep_verify_[0-9]*: succeeded$'
ok $? "then the deployment line before it"
[ "$(stats 'd["last_verify"]["resume"]')" = False ]
ok $? "verify sent resume false"
run verify --resume q/alpha
[ "$(stats 'd["last_verify"]["resume"]')" = True ]
ok $? "verify --resume"

run snapshot q/beta
is_rc 1 "a failed deployment exits 1"
grep -q '^  health     failed    host said no$' "$tmp/out"
ok $? "the failed phase with its error"
tail -n 1 "$tmp/out" | grep -q '^deployment dep_snapshot_[0-9]*: failed$'
ok $? "deployment <id>: failed"
err_has "denv: deployment dep_snapshot_" "denv: message on stderr"

run snapshot q/alpha --wait=false
is_rc 0 "snapshot --wait=false"
jq_ok 'd["deployment"]["Kind"] == "snapshot" and len(d["phases"]) == 3' "prints the 202 response"
DEP=$(jq_get 'd["deployment"]["ID"]')
run deployment watch "$DEP"
is_rc 1 "deployment watch of a failing deployment exits 1"
tail -n 1 "$tmp/out" | grep -q "^deployment $DEP: failed$"
ok $? "watch ends with the status line"

run rollback q/alpha ver_7
is_rc 0 "rollback"
[ "$(stats 'd["last_rollback"]["version"]')" = ver_7 ]
ok $? "rollback sent the version"
run rollback q/alpha
is_rc 2 "rollback without a version is a usage error"

run fork q/nope
is_rc 1 "unknown environment name"
err_is "denv: project q has no environment named nope" "names what is missing"

# ---- bare environment names (q has alpha and beta, r has alpha and gamma) ----
run fork --name r1 gamma
is_rc 0 "fork --name r1 gamma: a name only one project has"
[ "$(stats 'd["last_fork"]["name"]')" = r1 ] && grep -q '^deployment dep_fork_' "$tmp/out"
ok $? "the fork went to that environment"
run fork beta
is_rc 0 "a bare name with the default fork name"
stats 'd["last_fork"]["name"]' | grep -q '^beta-fork-[0-9]*$'
ok $? "default name from the bare name"
run fork --name r2 alpha
is_rc 1 "a name two projects have"
err_is 'denv: environment "alpha" is in more than one project; use <project>/<env>: q/alpha, r/alpha' \
	"ambiguous: use <project>/<env> and the candidates"
run fork --name r3 nope
is_rc 1 "a name no project has"
err_is 'denv: no environment named "nope"; use <project>/<env> or an id (env_...); there are: q/alpha, q/beta, r/alpha, r/gamma' \
	"unknown: use <project>/<env> and what there is (live ones)"
run fork env_gamma --name r4
is_rc 0 "an id still works"

# ---- exec ----
run exec --json --service box q/alpha -- sh -c 'id -u; exit 3'
is_rc 0 "exec --json: a non-zero exit code is not a CLI error"
jq_ok 'd["exit_code"] == 3 and d["stdout"].startswith("[\"sh\", \"-c\", \"id -u; exit 3\"]")' \
	"exec --json prints {exit_code, stdout, stderr}"
run exec --service box q/alpha -- sh -c 'id -u; exit 3'
is_rc 3 "exec exits with the command's code"
[ "$(cat "$tmp/out")" = '["sh", "-c", "id -u; exit 3"]
line 2' ] && [ "$(cat "$tmp/err")" = 'err 1
err 2' ]
ok $? "exec: the command's stdout on stdout, its stderr on stderr, as they were"
for code in 0 1 2 255; do
	run exec --service box q/alpha exit $code
	is_rc $code "exec: exit $code is passed on"
done
! grep -q '^denv:' "$tmp/err"
ok $? "exec: no denv: line when the command ran"
run exec q/alpha --service box ls -l --service x
is_rc 3 "exec: flags after the environment, argv without --"
[ "$(stats 'd["last_exec"]["cmd"]')" = "['ls', '-l', '--service', 'x']" ]
ok $? "exec: words after the command belong to it"
run exec --service box q/alpha timeout
is_rc 124 "exec: the host's timeout exits 124"
err_is "denv: env.exec: timed out after 1 s (the process was killed)" "and says so"
run exec --service box q/alpha cpgone
is_rc 124 "exec: the control plane's timeout exits 124 too"
run exec --service box q/alpha frozen
is_rc 125 "exec: a refusal of the host exits 125"
err_is 'denv: env.exec: service "box" is frozen by verify; resume it with `denv verify --resume q/alpha`' \
	"with the host's message, the environment named as it was given"
run exec --service box env_alpha frozen
err_is 'denv: env.exec: service "box" is frozen by verify; resume it with `denv verify --resume env_alpha`' \
	"or by its id when that was given"
run exec --service box q/alpha nocode
is_rc 125 "exec: an answer without an exit code exits 125"
run exec --service box q/nope ls
is_rc 125 "exec: an unknown environment exits 125"
err_has "denv: project q has no environment named nope" "with a denv: line"
run exec q/alpha ls
is_rc 125 "exec without --service: a usage error exits 125 (not 2)"
err_has "usage: denv exec" "and prints the usage"
run exec --bogus q/alpha ls
is_rc 125 "exec with an unknown flag exits 125"
DENV_API_KEY= run exec --service box q/alpha ls
is_rc 125 "exec without a credential exits 125"

# ---- files ----
mkdir -p "$tmp/up/sub" "$tmp/dl"
echo a >"$tmp/up/a.txt"
echo b >"$tmp/up/sub/b.txt"
run files put --service box q/alpha "$tmp/up" /home/agent
is_rc 0 "files put"
jq_ok 'd["ok"] is True and d["bytes"] > 0' "files put prints the answer"
[ "$(stats 'd["uploads"][-1]["names"]')" = "['up', 'up/a.txt', 'up/sub', 'up/sub/b.txt']" ]
ok $? "files put: the tree under its base name"
[ "$(stats 'd["uploads"][-1]["key"]+" "+d["uploads"][-1]["dest"]+" "+d["uploads"][-1]["service"]+" "+d["uploads"][-1]["ctype"]')" = "target /home/agent box application/x-tar" ]
ok $? "files put: target (docker cp's rules), service, content type"
[ "$(stats 'd["uploads"][-1]["owner"]')" = None ]
ok $? "files put: no owner unless --owner"
run files put --service box --owner ubuntu:staff q/alpha "$tmp/up/a.txt" /home/agent/x
is_rc 0 "files put --owner"
[ "$(stats 'd["uploads"][-1]["owner"]+" "+d["uploads"][-1]["dest"]')" = "ubuntu:staff /home/agent/x" ]
ok $? "files put --owner sends owner"
run files put --service box q/alpha "$tmp/up/a.txt" relative/x
is_rc 2 "files put to a relative remote path is a usage error"
run files put --service box q/alpha "$tmp/up/a.txt" /tmp
is_rc 0 "files put of one file"
[ "$(stats 'd["uploads"][-1]["names"]')" = "['a.txt']" ]
ok $? "a single file is one entry"
run files put --service box q/alpha "$tmp/none" /tmp
is_rc 1 "files put of a missing path"

run files get q/alpha /good "$tmp/dl/good" --service box
is_rc 0 "files get"
out_has "2 files written under $tmp/dl/good" "files get: <n> files written under <dir>"
[ "$(cat "$tmp/dl/good/logs/a.txt")" = alpha ]
ok $? "files get: content"
run files get --service box q/alpha /dotdot "$tmp/dl/dd"
is_rc 1 "files get refuses an archive with ../"
err_has 'entry "../escaped.txt": path escapes the destination' "names the entry"
[ ! -e "$tmp/dl/escaped.txt" ]
ok $? "nothing written outside the target"
run files get --service box q/alpha /symlink "$tmp/dl/sl"
is_rc 1 "files get refuses an escaping symlink"
err_has 'entry "link"' "names the link"
[ ! -e "$tmp/dl/sl/link" ] && [ ! -e "$tmp/etc/pwned" ] && [ ! -e /etc/pwned ]
ok $? "no link, nothing written through it"
run files get q/alpha /good "$tmp/dl/x"
is_rc 2 "files get without --service is a usage error"

# ---- polling when the stream is missing ----
kill $(echo $pids) 2>/dev/null
start_fake || exit 1
export DENV_SERVER=$server
run fork q/alpha --name f2
is_rc 0 "fork without the stream (polling)"
tail -n 1 "$tmp/out" | grep -q '^deployment dep_fork_[0-9]*: succeeded$'
ok $? "polling reaches the end"
[ "$(stats 'd["ws"]')" -eq 0 ] && [ "$(stats 'd["dep_gets"]')" -ge 2 ]
ok $? "no stream was used; the deployment was polled"
run verify q/alpha
tail -n 1 "$tmp/out" | grep -qx 'reward: 1 (source: reward.txt)'
ok $? "verify by polling prints the reward last"

# ---- errors from the server ----
DENV_API_KEY=dak_wrong run fork q/alpha
is_rc 1 "a bad key"
err_is "denv: invalid API key" "the server's message"
DENV_SERVER=http://127.0.0.1:1 run snapshot env_alpha
is_rc 1 "no server"
grep -q "^denv: .*127.0.0.1:1" "$tmp/err"
ok $? "connection error names the address"

done_testing
