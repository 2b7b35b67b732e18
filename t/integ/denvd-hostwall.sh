#!/bin/sh
# Containers of an environment cannot open connections to the host itself
# (its bridge gateway, services on 0.0.0.0), with egress denied (an internal
# network) or allowed; one service with egress denied has no network at all
# (loopback only); destroy removes the firewall rule.
# Real denv-cp, denvd and Docker.
suite=hostwall
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
listener=
suite_cleanup() { [ -z "$listener" ] || kill "$listener" 2>/dev/null; }

echo "1..11"
if ! sh "$top/t/docker-up.sh" busybox >/dev/null 2>&1 || ! command -v iptables >/dev/null; then
	echo "ok 1 # SKIP Docker or iptables not usable here"; exit 0
fi
stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined"

# A listener on every address of the host.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 0.0.0.0 --directory "$tmp" >/dev/null 2>&1 &
listener=$!
sleep 0.5

# Control: on a plain network of the same kind, without the wall, a container
# does reach the listener; so the checks below cannot pass merely because it
# is unreachable anyway.
ctl=denv-hostwall-ctl-$(basename "$tmp" | tr 'A-Z.' 'a-z-')
docker network create "$ctl" >/dev/null
gw0=$(docker network inspect -f '{{(index .IPAM.Config 0).Gateway}}' "$ctl")
docker run --rm --network "$ctl" denv-test/busybox:latest timeout 5 wget -q -O /dev/null "http://$gw0:$port/" >/dev/null 2>&1
ok $? "control: a container on a plain network reaches the host listener"
docker network rm "$ctl" >/dev/null 2>&1

"$top/bin/denv" project create wall >/dev/null 2>&1
second='
  db:
    image: denv-test/busybox:latest
    command: ["sleep", "infinity"]'
for egress in deny allow; do
	# With egress denied, two services: one alone would have no network.
	cat >"$tmp/compose-$egress.yaml" <<EOF2
x-denv:
  egress: $egress
services:
  box:
    image: denv-test/busybox:latest
    command: ["sleep", "infinity"]$([ $egress = deny ] && printf '%s' "$second")
EOF2
	"$top/bin/denv" deploy --project wall --env "e$egress" -f "$tmp/compose-$egress.yaml" >"$tmp/deploy-$egress.log" 2>&1
	ok $? "deploy with egress $egress"
	env=$("$top/bin/denv" env get "wall/e$egress" | stack_json 'd["environment"]["ID"]')
	project=$(printf '%s' "$env" | tr 'A-Z' 'a-z')
	gw=$(docker network inspect -f '{{(index .IPAM.Config 0).Gateway}}' "${project}_default")
	out=$("$top/bin/denv" exec --json --service box "wall/e$egress" -- sh -c \
		"timeout 5 wget -q -O /dev/null http://$gw:$port/ && echo REACHED || echo blocked" |
		stack_json 'd["stdout"].strip()')
	[ "$out" = blocked ]
	ok $? "egress $egress: the container cannot reach the host ($out)"
done

# One service, egress denied: Docker's none network, only loopback inside.
printf 'services:\n  box:\n    image: denv-test/busybox:latest\n    command: ["sleep", "infinity"]\n' >"$tmp/compose-lone.yaml"
"$top/bin/denv" deploy --project wall --env elone -f "$tmp/compose-lone.yaml" >"$tmp/deploy-lone.log" 2>&1
ok $? "deploy one service with egress denied"
lone=$("$top/bin/denv" env get wall/elone | stack_json 'd["environment"]["ID"]' | tr 'A-Z' 'a-z')
mode=$(docker inspect -f '{{.HostConfig.NetworkMode}}' "$lone-box-1" 2>&1)
ifaces=$("$top/bin/denv" exec --json --service box wall/elone -- sh -c "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '" |
	stack_json 'd["stdout"].split()')
[ "$mode" = none ] && [ "$ifaces" = "['lo']" ] && ! docker network inspect "${lone}_default" >/dev/null 2>&1
ok $? "it has no network: mode $mode, interfaces $ifaces"
hostip=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(("10.255.255.255", 1)); print(s.getsockname()[0])')
out=$("$top/bin/denv" exec --json --service box wall/elone -- sh -c \
	"timeout 5 wget -q -O /dev/null http://$hostip:$port/ && echo REACHED || echo blocked" | stack_json 'd["stdout"].strip()')
[ "$out" = blocked ]
ok $? "and cannot reach the host either ($out)"
iptables -S INPUT 2>/dev/null | grep -q "denv $project"
ok $? "an INPUT rule names the environment"

"$top/bin/denv" env destroy wall/eallow >/dev/null 2>&1
stack_wait_destroyed wall/eallow
! iptables -S INPUT 2>/dev/null | grep -q "denv $project"
ok $? "destroy removes the environment's rule"
