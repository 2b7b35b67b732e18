# stack.sh: a control plane and a joined sidecar for shell tests and the demo.
# Source it, then call stack_start; stack_stop runs from the caller's trap.
#   needs: $top (repository root), $tmp (this run's temp dir)
#   sets:  DENV_SERVER, DENV_API_KEY (exported), stack_cp_pid, stack_sc_pid
# Only this run's environments (their ids are the directories under the
# sidecar's $tmp/data/envs) are removed, with their networks and host-wall
# rules; also any container with a mount under $tmp.

stack_cp_pid=
stack_sc_pid=

stack_json() { "$top/python/.venv/bin/python" -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# stack_start: denv-cp on $tmp/store, denvd joined with data under $tmp.
# Extra arguments go to denvd. Returns 1 with a message on failure.
stack_start() {
	n=0
	DENV_API_KEY=dak_test_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
	export DENV_API_KEY
	DENV_BOOTSTRAP_KEY=$DENV_API_KEY "$top/bin/denv-cp" -addr 127.0.0.1:0 -db "$tmp/store" >"$tmp/cp.log" 2>&1 &
	stack_cp_pid=$!
	until grep -q 'listening on' "$tmp/cp.log"; do
		n=$((n + 1)); [ $n -lt 100 ] || { echo "denv-cp did not start" >&2; return 1; }; sleep 0.1
	done
	DENV_SERVER=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$tmp/cp.log" | head -n 1)
	export DENV_SERVER
	token=$("$top/bin/denv" host join-token | stack_json 'd["token"]') || return 1
	# The egress probe aims at TEST-NET-1 (192.0.2.1): never a real host.
	"$top/bin/denvd" join --server "$DENV_SERVER" --token "$token" --state "$tmp/host.json" \
		--data "$tmp/data" --probe-url http://192.0.2.1/ "$@" >"$tmp/denvd.log" 2>&1 &
	stack_sc_pid=$!
	n=0
	until "$top/bin/denv" host list 2>/dev/null | grep -q '"connected": true'; do
		n=$((n + 1)); [ $n -lt 100 ] || { echo "denvd did not connect" >&2; return 1; }; sleep 0.2
	done
}

# stack_wait_destroyed REF: until the environment's status is destroyed (60 s).
stack_wait_destroyed() {
	n=0
	until [ "$("$top/bin/denv" env get "$1" 2>/dev/null | stack_json 'd["environment"]["Status"]' 2>/dev/null)" = destroyed ]; do
		n=$((n + 1)); [ $n -lt 120 ] || return 1; sleep 0.5
	done
}

stack_stop() {
	[ -n "$stack_sc_pid" ] && kill "$stack_sc_pid" 2>/dev/null && wait "$stack_sc_pid" 2>/dev/null
	# The name gateway (denvd --ingress-domain) is a daemon of its own.
	[ -s "$tmp/data/names/names.pid" ] && kill "$(cat "$tmp/data/names/names.pid")" 2>/dev/null
	[ -n "$stack_cp_pid" ] && kill "$stack_cp_pid" 2>/dev/null && wait "$stack_cp_pid" 2>/dev/null
	nets=
	for c in $(docker ps -aq 2>/dev/null); do
		if docker inspect -f '{{range .Mounts}}{{.Source}} {{end}}' "$c" 2>/dev/null | grep -q "$tmp"; then
			nets="$nets $(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}' "$c" 2>/dev/null)"
			docker rm -f "$c" >/dev/null 2>&1 || true
		fi
	done
	for d in "$tmp"/data/envs/*; do
		[ -d "$d" ] || continue
		p=$(basename "$d" | tr 'A-Z' 'a-z')
		for c in $(docker ps -aq --filter "label=com.docker.compose.project=$p" 2>/dev/null); do
			docker rm -f "$c" >/dev/null 2>&1 || true
		done
		nets="$nets ${p}_default"
		while iptables -S INPUT 2>/dev/null | grep -q "denv $p\""; do
			rule=$(iptables -S INPUT 2>/dev/null | grep "denv $p\"" | head -n 1 | sed 's/^-A /-D /')
			eval "iptables $rule" >/dev/null 2>&1 || break
		done
	done
	for n in $nets; do
		case $n in bridge|host|none) ;; *) docker network rm "$n" >/dev/null 2>&1 || true ;; esac
	done
	stack_cp_pid=
	stack_sc_pid=
}
