# box.sh: what the exec-*.sh scripts share: TAP helpers, the REST helper,
# and a stack with one deployed environment.
#   needs: $top, $tmp (this run's temp dir, removed by the trap)
#   sets:  t (checks so far), code (api's status), env_id, ctr (box_up's)
. "$top/t/lib/stack.sh"
PATH=$top/bin:$PATH
PY=$top/python/.venv/bin/python
t=0
ok() {
	t=$((t + 1))
	if [ "$1" = 0 ]; then
		echo "ok $t - $2"
	else
		echo "not ok $t - $2"
		for f in out err; do [ -s "$tmp/$f" ] && sed -n "1,12s/^/#   $f: /p" "$tmp/$f"; done
	fi
}
run() { denv "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }
# api METHOD PATH [BODY]: the answer in $tmp/out, its status in $code.
api() {
	code=$(curl -s -o "$tmp/out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $DENV_API_KEY" \
		-H 'Content-Type: application/json' ${3:+--data "$3"} "$DENV_SERVER$2")
}
# j EXPR: a Python expression over the JSON answer in $tmp/out (as d).
j() { "$PY" -c "import json,sys; d=json.load(open('$tmp/out')); print($1)"; }
box_cleanup() {
	stack_stop
	rm -rf "$tmp"
}
trap box_cleanup EXIT
trap 'exit 1' INT TERM

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
