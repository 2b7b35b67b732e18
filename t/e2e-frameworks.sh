#!/bin/sh
# e2e-frameworks.sh [client verify inspect inspect_selfcheck harbor openenv verifiers interop
# karotte hud]: the framework
# conformance suite (python/tests/conformance.py) against a real control plane
# and sidecar started here: bin/denv-cp on a temporary store and, when built,
# bin/denvd joined to it with a data directory in the same temporary place.
# Needs Docker, the fixture images (t/docker-up.sh builds them) and python/.venv
# with the package installed (pip install -e python) and the frameworks.
# Prints TAP and, at the end, one line of counts per framework; what the
# backend cannot do yet is reported as SKIP with the reason.
# On failure prints the tails of the control-plane and sidecar logs and exits 1.
# DENV_E2E_TAP=1 (set by t/integ/python-conformance.sh): a missing prerequisite
# is a TAP skip-all instead of an error.
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
# This checkout's package (and harbor run's -e denv.harbor:…), whichever
# checkout the venv's editable install points at.
PYTHONPATH="$top/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
tap=${DENV_E2E_TAP:-0}

skip_all() {
	if [ "$tap" = 1 ]; then
		echo "1..0 # SKIP $1"
		exit 0
	fi
	echo "e2e-frameworks: $1" >&2
	exit 2
}

[ -x "$top/bin/denv-cp" ] || skip_all "bin/denv-cp is not built (make)"
[ -x "$py" ] || skip_all "python/.venv is missing (t/deps.sh)"
"$py" -c 'import denv, harbor, inspect_ai, openenv' >/dev/null 2>&1 ||
	skip_all "python/.venv lacks the denv package or a framework (pip install -e python; t/requirements.txt)"
sh "$top/t/docker-up.sh" all >/dev/null 2>&1 || skip_all "no Docker engine or fixture images (t/docker-up.sh all)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/denv-e2e.XXXXXX") || exit 1
key="dak_e2e_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
cp_pid=
sd_pid=
# leftovers: containers this run's sidecar made (their volumes live under $tmp,
# which identifies them; nothing else is touched) and their networks.
leftovers() {
	for c in $(docker ps -aq 2>/dev/null); do
		case $(docker inspect -f '{{range .Mounts}}{{.Source}} {{end}}' "$c" 2>/dev/null) in
		*"$tmp/"*)
			nets=$(docker inspect -f '{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}' "$c" 2>/dev/null)
			docker rm -f "$c" >/dev/null 2>&1
			for n in $nets; do
				case $n in env_*) docker network rm "$n" >/dev/null 2>&1 ;; esac
			done
			;;
		esac
	done
}
cleanup() {
	[ -n "$sd_pid" ] && kill "$sd_pid" 2>/dev/null && wait "$sd_pid" 2>/dev/null
	[ -n "$cp_pid" ] && kill "$cp_pid" 2>/dev/null && wait "$cp_pid" 2>/dev/null
	leftovers
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

logs() {
	echo "# ---- control plane log (tail) ----"
	tail -n 60 "$tmp/cp.log" 2>/dev/null | sed 's/^/# /'
	if [ -f "$tmp/denvd.log" ]; then
		echo "# ---- sidecar log (tail) ----"
		tail -n 60 "$tmp/denvd.log" | sed 's/^/# /'
	fi
}

# http METHOD PATH [JSON]: print the answer body; exit status 1 on HTTP >= 400.
http() {
	"$py" - "$1" "$2" "${3:-}" <<'PY'
import os, sys, urllib.request, urllib.error
m, p, body = sys.argv[1:4]
req = urllib.request.Request(os.environ["DENV_SERVER"] + p, method=m, data=body.encode() if body else None,
                             headers={"Authorization": "Bearer " + os.environ["DENV_API_KEY"],
                                      "Content-Type": "application/json"})
try:
    print(urllib.request.urlopen(req, timeout=10).read().decode())
except urllib.error.HTTPError as e:
    print(e.read().decode()); sys.exit(1)
except Exception as e:
    print(e); sys.exit(1)
PY
}

env -u DENV_SERVER -u DENV_API_KEY DENV_BOOTSTRAP_KEY="$key" DENV_TEAM=e2e \
	"$top/bin/denv-cp" -addr 127.0.0.1:0 -db "$tmp/db" -v >"$tmp/cp.log" 2>&1 &
cp_pid=$!
port=
n=0
while [ -z "$port" ] && [ $n -lt 100 ]; do
	port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/cp.log" | head -n 1)
	[ -n "$port" ] && break
	kill -0 "$cp_pid" 2>/dev/null || break
	n=$((n + 1))
	sleep 0.1
done
if [ -z "$port" ]; then
	echo "not ok 1 - denv-cp started"
	logs
	exit 1
fi
export DENV_SERVER="http://127.0.0.1:$port" DENV_API_KEY="$key"
echo "# denv-cp on $DENV_SERVER (store $tmp/db)"

if [ -x "$top/bin/denvd" ]; then
	tok=$(http POST /v1/join-tokens '{}' | "$py" -c 'import json,sys; print(json.load(sys.stdin)["token"])') || {
		echo "not ok 1 - a join token for the sidecar"
		logs
		exit 1
	}
	mkdir -p "$tmp/data"
	"$top/bin/denvd" join --server "$DENV_SERVER" --token "$tok" --state "$tmp/host.json" \
		--data "$tmp/data" >"$tmp/denvd.log" 2>&1 &
	sd_pid=$!
	n=0
	until http GET /v1/hosts | grep -q '"connected": *true'; do
		n=$((n + 1))
		if [ $n -gt 60 ] || ! kill -0 "$sd_pid" 2>/dev/null; then
			echo "not ok 1 - denvd joined the control plane within 30 s"
			logs
			exit 1
		fi
		sleep 0.5
	done
	echo "# denvd joined (data $tmp/data)"
else
	echo "# bin/denvd is not built: checks that need a host are SKIPPED ([F6])"
fi

cd "$top/python/tests" || exit 1
"$py" conformance.py "$@"
rc=$?
if [ $rc -ne 0 ]; then
	logs
	exit 1
fi
exit 0
