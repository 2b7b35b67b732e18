#!/bin/sh
# docker-up.sh: make a Docker engine and the fixture images available to the
# tests that need them. Idempotent: a running engine is left alone; images are
# rebuilt only when their recipe changed (t/fixtures/images/build.sh).
#   sh t/docker-up.sh [busybox|debian|all]   (default: busybox)
# Exits 0 when ready, 1 with a message when Docker cannot be made to work.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
images=${1:-busybox}

if ! command -v docker >/dev/null 2>&1 || ! command -v dockerd >/dev/null 2>&1; then
	echo "docker-up: docker.io is not installed (t/deps.sh installs it)" >&2
	exit 1
fi
if ! docker info >/dev/null 2>&1; then
	if [ "$(id -u)" != 0 ]; then
		echo "docker-up: no Docker engine answers and only root can start one" >&2
		exit 1
	fi
	dockerd >/var/log/dockerd.log 2>&1 &
	n=0
	until docker info >/dev/null 2>&1; do
		n=$((n + 1))
		if [ $n -gt 60 ]; then
			tail -n 20 /var/log/dockerd.log >&2
			echo "docker-up: dockerd did not answer within 30 s (log: /var/log/dockerd.log)" >&2
			exit 1
		fi
		sleep 0.5
	done
fi
sh "$top/t/fixtures/images/build.sh" "$images" >/dev/null || {
	echo "docker-up: building fixture images ($images) failed" >&2
	exit 1
}
exit 0
