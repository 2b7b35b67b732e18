#!/bin/sh
# gvisor.sh: what gVisor (runsc, as denvd registers it: ptrace platform,
# host network) costs against runc for a service's start and for an exec,
# measured with the docker CLI on the fixture image denv-test/busybox.
# Ratios are runsc over runc from the same run. Needs runsc registered with
# Docker (start denvd once, or `denvd install`).
. "$(dirname "$0")/lib/common.sh"
fig gvisor.create "service start under gVisor (docker run -d)" "runc" ms report
fig gvisor.exec "exec true under gVisor" "runc" ms report
if ! docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
	pending gvisor.create "Docker lists no runsc runtime (apt-get install runsc; start denvd)"
	pending gvisor.exec "Docker lists no runsc runtime"
	exit 0
fi
n=7
quick && n=3
now_ms() { echo $(($(date +%s%N) / 1000000)); }
tag=benchgv$$
i=0
while [ $i -lt $n ]; do
	for rt in runc runsc; do
		t0=$(now_ms)
		docker run -d --name "$tag-$rt-$i" --runtime "$rt" denv-test/busybox:latest sleep 60 >/dev/null || continue
		t1=$(now_ms)
		docker exec "$tag-$rt-$i" true
		t2=$(now_ms)
		docker rm -f "$tag-$rt-$i" >/dev/null
		if [ $rt = runsc ]; then
			sample gvisor.create $((t1 - t0))
			sample gvisor.exec $((t2 - t1))
		else
			base gvisor.create $((t1 - t0))
			base gvisor.exec $((t2 - t1))
		fi
	done
	i=$((i + 1))
done
note "gvisor: runsc $(runsc --version 2>/dev/null | head -n 1 | cut -d' ' -f3), --platform=ptrace --network=host"
