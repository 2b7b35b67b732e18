#!/bin/sh
# denvd-engine-run.sh: a service's `docker run -d` argv (as render_run_argv
# writes it) run as create + start on dockerd's socket (engine_run) makes
# the same container as the docker CLI given that argv: the fields denv
# sets are compared from `docker inspect` of one made each way. What it
# does not map (an unknown flag, a missing image) is left to the CLI with
# nothing created. Real Docker; the containers and network are ours only.
set -u
top=${DENV_TOP:-$PWD}
build=${DENV_BUILD:-$top/build}
helper=$build/helpers/sidecar-engine-run
if [ ! -x "$helper" ]; then echo "1..0 # SKIP $helper not built"; exit 0; fi
if ! docker image inspect denv-test/busybox >/dev/null 2>&1; then echo "1..0 # SKIP no denv-test/busybox"; exit 0; fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denv-t-engine-run.XXXXXX") || exit 1
p=denvt-er-$$
cleanup() {
	docker ps -aq --filter "name=^$p-" | xargs -r docker rm -f -v >/dev/null 2>&1
	docker network rm "${p}_default" >/dev/null 2>&1
	rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/vol" "$tmp/ro"
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
echo "1..9"

# What denv sets on a container, one line per field, in a form both ways share.
FMT='{{.Config.Hostname}}|{{.Config.User}}|{{json .Config.Env}}|{{json .Config.Cmd}}|{{.Config.Image}}|{{json .Config.Labels}}|{{json .Config.Healthcheck}}|{{json .Config.ExposedPorts}}|{{.HostConfig.NetworkMode}}|{{.HostConfig.Memory}}|{{.HostConfig.PidsLimit}}|{{.HostConfig.NanoCpus}}|{{json .HostConfig.Binds}}|{{json .HostConfig.ExtraHosts}}|{{json .HostConfig.PortBindings}}|{{range $k, $v := .NetworkSettings.Networks}}{{$k}}={{json $v.Aliases}} {{end}}|{{.State.Running}}'

# args NAME: the argv of a networkless service, as render writes it.
none_args() {
	echo "run -d --name $1 --hostname box --network none --add-host box:127.0.0.1 \
--label com.docker.compose.project=$p --label com.docker.compose.service=box \
--label com.docker.compose.container-number=1 --label ai.denv.env=env_test \
--memory 256m --pids-limit 128 --cpus 0.500 --user 1000:1000 -e A=1 -e B=x=y \
-v $tmp/vol:/data -v $tmp/ro:/ro:ro --health-cmd true --health-interval 1s500ms --health-retries 3 \
denv-test/busybox sleep 3600"
}
net_args() {
	echo "run -d --name $1 --hostname web --network ${p}_default --network-alias web \
--label ai.denv.env=env_test --memory 64m --pids-limit 64 --cpus 1.000 -p 127.0.0.1::8080 -p 127.0.0.1::53/udp \
denv-test/busybox sleep 3600"
}
# Only the fields that must differ (the name) are normalised away.
same() {
	a=$(docker inspect -f "$FMT" "$1" 2>&1)
	b=$(docker inspect -f "$FMT" "$2" 2>&1)
	[ -n "$a" ] && [ "$a" = "$b" ] || { echo "# api: $a" >&2; echo "# cli: $b" >&2; return 1; }
}

# both_ways ARGS-FN KIND WHAT: the argv through the API, the same through the CLI, compared.
both_ways() {
	out=$("$helper" $($1 "$p-$2-api"))
	ok $([ "$out" = api ]; echo $?) "$3 goes through the API ($out)"
	docker $($1 "$p-$2-cli") >/dev/null 2>&1
	ok $? "the CLI runs the same argv"
	same "$p-$2-api" "$p-$2-cli"
	ok $? "and both containers have the same $4"
}
both_ways none_args none "a networkless service" "config, caps, mounts, health and hosts"
docker network create "${p}_default" >/dev/null 2>&1
both_ways net_args net "a service on a network with ports" "network, alias and 127.0.0.1 port bindings"

out=$("$helper" run -d --name "$p-odd" --network none --privileged x denv-test/busybox true)
ok $([ "$out" = cli ] && [ -z "$(docker ps -aq --filter "name=^$p-odd")" ]; echo $?) \
	"a flag render never writes: left to the CLI, nothing created ($out)"
out=$("$helper" run -d --name "$p-noimg" --network none denv-test/no-such-image:0 true)
ok $([ "$out" = cli ] && [ -z "$(docker ps -aq --filter "name=^$p-noimg")" ]; echo $?) \
	"an image dockerd does not have: left to the CLI (which would pull), nothing created ($out)"
out=$("$helper" run -d --name "$p-none-api" --network none denv-test/busybox true)
ok $([ "$out" = cli ] && [ "$(docker inspect -f '{{json .Config.Cmd}}' "$p-none-api")" = '["sleep","3600"]' ]; echo $?) \
	"a name in use: left to the CLI, the container there untouched ($out)"
