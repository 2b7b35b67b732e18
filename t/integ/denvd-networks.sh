#!/bin/sh
# More environments on one host than Docker's default address pools hold
# (about 31 networks): denvd gives each network a /25 of its own pool.
# Real denv-cp, denvd and Docker.
suite=networks
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
count=33

echo "1..5"
if ! sh "$top/t/docker-up.sh" busybox >/dev/null 2>&1; then
	echo "ok 1 # SKIP Docker not usable here"; exit 0
fi
stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined"

"$top/bin/denv" project create many >/dev/null 2>&1
# egress allow: one service with egress denied would get no network at all.
printf 'x-denv:\n  egress: allow\nservices:\n  box:\n    image: denv-test/busybox:latest\n    command: ["sleep", "infinity"]\n' >"$tmp/compose.yaml"
i=0
while [ $i -lt $count ]; do
	"$top/bin/denv" deploy --project many --env "e$i" -f "$tmp/compose.yaml" --wait=false >/dev/null 2>&1
	i=$((i + 1))
done
# Until all are running, or one failed (the project's own "alpha" env,
# never deployed, stays pending: do not wait for it).
n=0
while [ "$("$top/bin/denv" project envs many 2>/dev/null | grep -c '"Status": "running"')" -lt "$count" ]; do
	"$top/bin/denv" project envs many 2>/dev/null | grep -q '"Status": "failed"' && break
	n=$((n + 1)); [ $n -lt 300 ] || break; sleep 1
done
running=$("$top/bin/denv" project envs many | grep -c '"Status": "running"')
[ "$running" -eq "$count" ]
ok $? "$count environments running on one host (got $running)"

subnets=$(for d in "$tmp"/data/envs/*; do
	p=$(basename "$d" | tr 'A-Z' 'a-z')
	docker network inspect -f '{{(index .IPAM.Config 0).Subnet}}' "${p}_default" 2>/dev/null
done)
[ "$(printf '%s\n' "$subnets" | grep -c '/25$')" -eq "$count" ]
ok $? "each network has a /25"
[ "$(printf '%s\n' "$subnets" | sort -u | grep -c .)" -eq "$count" ]
ok $? "and no two share one"
! printf '%s\n' "$subnets" | grep -v -q '^10\.2\(0[89]\|1[0-9]\|2[0-3]\)\.'
ok $? "all inside the default pool 10.208.0.0/12"
