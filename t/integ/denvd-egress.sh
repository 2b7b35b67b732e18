#!/bin/sh
# denvd-egress.sh: the egress probe against a test server in a network
# namespace made here (a stand-in for the internet, reached through this
# host's routing, never leaving the machine). Prints TAP; removes the
# namespace, its veth pair and every container and network it made.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1; then
	suite_skip "needs root and iproute2"
fi
suite_need_docker busybox
tag=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
ns=denvt$tag
hv=dvh$tag
nv=dvn$tag
# A /30 in 198.18.0.0/15 (the benchmarking range): ours alone, inside this machine.
x=$(( 0x$(echo "$tag" | cut -c1-2) ))
y=$(( (0x$(echo "$tag" | cut -c3-4) & 63) * 4 ))
hostaddr=198.18.$x.$((y + 1))
nsaddr=198.18.$x.$((y + 2))
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denvd-egress.XXXXXX")
cleanup() {
	ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null
	ip netns del "$ns" 2>/dev/null
	ip link del "$hv" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
if ! { ip netns add "$ns" && ip link add "$hv" type veth peer name "$nv" &&
	ip link set "$nv" netns "$ns" && ip addr add "$hostaddr/30" dev "$hv" && ip link set "$hv" up &&
	ip -n "$ns" addr add "$nsaddr/30" dev "$nv" && ip -n "$ns" link set "$nv" up &&
	ip -n "$ns" link set lo up && ip -n "$ns" route add default via "$hostaddr"; } 2>"$tmp/ip.err"; then
	echo "1..0 # SKIP cannot make a test network namespace: $(head -n1 "$tmp/ip.err")"; exit 0
fi
"$py" "$top/t/sidecar/test_egress.py" "$bin" "$tmp" "$ns" "$nsaddr"
