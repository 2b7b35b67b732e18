#!/bin/sh
# images.sh [--quiet]: `make images`. Makes every image the tests and
# examples/ deploy on this machine, from local parts (there is no registry):
#   denv-test/busybox, denv-test/debian   t/fixtures/images/build.sh, through
#                                         t/docker-up.sh (which starts Docker)
#   denv-examples/<name>                  examples/<name>/Dockerfile, FROM a
#                                         fixture image
# then prints what exists: name, tag, id, age, size (not with --quiet).
# An image is tagged with a hash of its recipe (for an example: its
# directory and its base image's id) and as :latest; an image whose hash tag
# exists is not built again.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
quiet=${1:-}

say() { [ "$quiet" = --quiet ] || echo "images: $*"; }
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

if ! have_image denv-test/debian:latest; then
	say "building the fixture images (the first time, debootstrap of Debian bookworm takes a minute or more)"
fi
sh "$top/t/docker-up.sh" all || exit 1

# build_example DIR: denv-examples/<basename DIR> from DIR/Dockerfile.
build_example() {
	dir=$1
	name=denv-examples/$(basename "$dir")
	base=$(sed -n 's/^FROM[[:space:]]*\([^[:space:]]*\).*/\1/p' "$dir/Dockerfile" | head -n 1)
	have_image "$base" || { echo "images: $name needs $base, which does not exist" >&2; return 1; }
	hash=$({ docker image inspect -f '{{.Id}}' "$base"; find "$dir" -type f | LC_ALL=C sort | xargs cat; } |
		sha256sum | cut -c1-12)
	if have_image "$name:$hash"; then
		say "$name:$hash (cached)"
		return 0
	fi
	out=$(docker build -q -t "$name:$hash" "$dir" 2>&1) || {
		printf '%s\n' "$out" | tail -n 20 >&2
		echo "images: docker build of $name failed" >&2
		return 1
	}
	docker tag "$name:$hash" "$name:latest" || return 1
	say "$name:$hash (built)"
}

for df in "$top"/examples/*/Dockerfile; do
	[ -f "$df" ] || continue
	build_example "$(dirname "$df")" || exit 1
done

[ "$quiet" = --quiet ] && exit 0
docker image ls --filter 'reference=denv-test/*' --filter 'reference=denv-examples/*' \
	--format 'table {{.Repository}}\t{{.Tag}}\t{{.ID}}\t{{.CreatedSince}}\t{{.Size}}'
