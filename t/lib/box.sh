# box.sh: what the exec-*.sh scripts share: stack-tap.sh's frame, j, and a
# stack with one deployed environment.
#   needs: $suite (stack-tap.sh makes $tmp from it)
#   sets:  env_id, ctr (box_up's)
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
# j EXPR: a Python expression over the JSON answer in $tmp/out (as d).
j() { "$PY" -c "import json,sys; d=json.load(open('$tmp/out')); print($1)"; }

# box_up PROJECT ENV COMPOSE: skip without root and Docker, else a stack and
# the environment deployed; env_id, and ctr (the first service's container).
box_up() {
	if [ "$(id -u)" != 0 ] || ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
		echo "1..0 # SKIP needs root and Docker with the fixture images"
		exit 0
	fi
	stack_start >"$tmp/start.log" 2>&1
	ok $? "control plane up, sidecar joined"
	denv project create "$1" >/dev/null
	denv deploy --project "$1" --env "$2" -f "$3" >"$tmp/deploy.log" 2>&1
	ok $? "deploy $1/$2"
	env_id=$(denv env get "$1/$2" | stack_json 'd["environment"]["ID"]')
	ctr=$(docker ps -q --filter "label=com.docker.compose.project=$(echo "$env_id" | tr 'A-Z' 'a-z')" | head -n 1)
}
