#!/bin/sh
# cli-quotas.sh: denv quotas against a real bin/denv-cp: show the team's
# quotas and use, set them as the operator team, back to the server's
# default, and the refusals (a non-operator team, a bad value).
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/cli/lib.sh"
if [ ! -x "$top/bin/denv" ] || [ ! -x "$top/bin/denv-cp" ]; then
	echo "1..0 # SKIP bin/denv or bin/denv-cp is not built"
	exit 0
fi
KEY=dak_cli_quotas_key_0123456789abcdef
start_cp DENV_BOOTSTRAP_KEY=$KEY DENV_DEV_LOGIN=1 DENV_MAX_ENVS=5 || { echo "1..0 # SKIP denv-cp did not start"; exit 0; }
export DENV_SERVER=$server DENV_API_KEY=$KEY

run quotas --help
is_rc 0 "denv quotas --help"
out_has "--sandboxes N" "it lists the quota flags"
run quotas
is_rc 0 "denv quotas"
jq_ok 'd["limits"] == {"max_environments": 5, "max_sandboxes": 0, "max_exec": 0} and d["use"]["environments"] == 0' \
	"the server's defaults and the use"
run project create q1
run quotas
jq_ok 'd["use"]["environments"] == 1' "a project's environment is counted"
run quotas --envs 1 --exec 3
is_rc 0 "the operator team sets its own quotas"
jq_ok 'd["overrides"] == {"max_environments": 1, "max_sandboxes": None, "max_exec": 3}' "they are the team's own"
run project create q2
is_rc 1 "a second environment is over the quota"
err_is "denv: quota exceeded: live environments 1 of 1 (this team's quota)" "the 429's message"
run quotas --envs default
jq_ok 'd["limits"]["max_environments"] == 5 and d["overrides"]["max_environments"] is None' "default: back to the flag"
run quotas --exec lots
is_rc 2 "a bad value is a usage error"
err_has "--exec: want a number (0: no limit) or default, not lots" "saying why"

# Another team (a dev-login user's): reads its own, may not set them.
sess=$(curl -s -X POST "$server/auth/dev-login" -H 'Content-Type: application/json' -d '{"email":"q@example.com"}' |
	"$PY" -c 'import json,sys; print(json.load(sys.stdin)["token"])')
DENV_API_KEY=$sess run quotas
is_rc 0 "a session shows its own team's quotas"
team=$(jq_get 'd["team_id"]')
DENV_API_KEY=$sess run quotas --envs 100
is_rc 1 "but may not set them"
err_is "denv: quotas are set by the server's operator team (the first team)" "the 403's message"
run quotas --team "$team" --envs 2
is_rc 0 "the operator team sets another team's"
jq_ok 'd["team_id"] == "'"$team"'" and d["limits"]["max_environments"] == 2' "--team names it"
done_testing
