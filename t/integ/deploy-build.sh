#!/bin/sh
# deploy-build.sh: compose build: end to end, against a real denv-cp and a
# joined denvd on real Docker (no registry: FROM the local fixture image):
#   - denv deploy -f packs the context relative to the compose file,
#     honouring .dockerignore, uploads it, and the host builds it: the
#     COPY'd file is in the container, the ignored one is not;
#   - prepare's evidence lists {service, context_digest, image, cached,
#     took_ms}; the version pins the built image's id;
#   - a second deploy of the unchanged context is cached (no build runs,
#     the image id is the same) and the context is not uploaded again;
#   - a fork of the version runs the pinned image without a build;
#   - a failing Dockerfile (RUN false) fails prepare with the build log's tail;
#   - a context over the 256 MiB limit is refused by the CLI, naming the
#     service and the size;
#   - builds go through the Engine API, the CLI is the fallback
#     (DENVD_BUILD_CLI=1); the host's sweep removes built images no version
#     pins (and only its own); the control plane removes stored contexts
#     no version names after -context-keep.
# Prints TAP; removes its containers, networks, images and data even on failure.
suite=deploy-build
. "${DENV_TOP:-$(pwd)}/t/lib/stack-tap.sh"
# Only the images this run built: their tags carry this run's digests.
suite_cleanup() {
	for i in $(cat "$tmp/images" 2>/dev/null); do docker rmi -f "$i" >/dev/null 2>&1; done
}
# builds: prepare's builds evidence of the deployment in $tmp/doc.
builds='[p for p in d["phases"] if p["Name"] == "prepare"][0]["Evidence"]["builds"]'

if ! sh "$top/t/docker-up.sh" all >/dev/null 2>&1; then
	echo "1..0 # SKIP Docker or the fixture images are not usable here"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "1..0 # SKIP needs root (the sidecar's data dir)"
	exit 0
fi
stack_start >"$tmp/start.log" 2>&1
ok $? "control plane up, sidecar joined"
denv project create --kind rl-environment w2 >/dev/null 2>&1

# ---- the contexts route: content-addressed, checked ----
api() { curl -s -o "$tmp/doc" -w '%{http_code}' -H "Authorization: Bearer $DENV_API_KEY" "$@"; }
printf 'not a tar' >"$tmp/body"
sum=$(sha256sum "$tmp/body" | cut -d' ' -f1)
zero=0000000000000000000000000000000000000000000000000000000000000000
[ "$(api "$DENV_SERVER/v1/contexts/$sum")" = 404 ]
ok $? "GET /v1/contexts/{sha256} of an unknown context is 404"
[ "$(api -X PUT --data-binary @"$tmp/body" "$DENV_SERVER/v1/contexts/$zero")" = 400 ] &&
	grep -q "the body's sha256 is $sum, not $zero" "$tmp/doc"
ok $? "a PUT whose body does not have the digest is 400"
[ "$(api -X PUT --data-binary @"$tmp/body" "$DENV_SERVER/v1/contexts/$sum")" = 201 ] &&
	[ "$(api "$DENV_SERVER/v1/contexts/$sum")" = 200 ] && [ "$(py 'd["bytes"]')" = 9 ]
ok $? "a PUT stores it; GET then says its size"

# ---- a context with a COPY'd file and an ignored one ----
mkdir -p "$tmp/proj/app/secrets"
named="denv-w2-test/app:$(basename "$tmp" | tr 'A-Z.' 'a-z-')"
echo "$named" >>"$tmp/images"
cat >"$tmp/proj/compose.yaml" <<EOF
services:
  app:
    image: $named
    build:
      context: ./app
      args: { GREETING: hello }
    command: ["sleep", "infinity"]
EOF
cat >"$tmp/proj/app/Dockerfile" <<'EOF'
FROM denv-test/busybox:latest
ARG GREETING
COPY . /ctx/
RUN echo "$GREETING" > /ctx/greeting
EOF
printf 'secrets\n*.log\n!keep.log\n' >"$tmp/proj/app/.dockerignore"
# This run's own content, so its digest (and image) is new to the host.
echo "run $tmp" >"$tmp/proj/app/copied.txt"
echo hidden >"$tmp/proj/app/secrets/token"
echo noise >"$tmp/proj/app/debug.log"
echo kept >"$tmp/proj/app/keep.log"

# Run from another directory: the context is relative to the compose file.
cd /
run deploy --project w2 --env one -f "$tmp/proj/compose.yaml"
ok $rc "a deploy with build: succeeds (exit $rc)"
grep -q '^build: service app: context ./app packed (.* bytes, sha256 [0-9a-f]\{12\}), uploaded$' "$tmp/err"
ok $? "the CLI packs the context and uploads it"
dep1=$(dep_of_out)
grep -q '^  prepare    | Step 1/[0-9]* : FROM denv-test/busybox:latest$' "$tmp/out"
ok $? "--wait shows the build's output under prepare as it runs"
denv events "dep:$dep1" >"$tmp/doc" 2>/dev/null
[ "$(py "any(e['Kind'] == 'progress' and e['Body']['message'].startswith('build: Step 4/') and ' : RUN echo' in e['Body']['message'] for e in d['events'])")" = True ]
ok $? "the build's output lines are progress events of dep:<id> (the live event stream)"
doc_of "$dep1"
[ "$(py "len($builds)")" = 1 ] && [ "$(py "$builds[0]['service']")" = app ] &&
	[ "$(py "$builds[0]['cached']")" = False ] && [ "$(py "$builds[0]['took_ms'] >= 0")" = True ] &&
	[ "$(py "len($builds[0]['context_digest'])")" = 64 ]
ok $? "prepare's evidence: service, context_digest, cached false, took_ms"
[ "$(py "$builds[0]['builder']")" = engine-api ]
ok $? "the build ran through the Engine API's POST /build (builder engine-api)"
tag=$(py "$builds[0]['image']")
id1=$(py "$builds[0]['image_id']")
ctx1=$(py "$builds[0]['context_digest']")
echo "$tag" >>"$tmp/images"
case "$tag" in denv-build/app:????????????) true ;; *) false ;; esac
ok $? "the image is tagged denv-build/app:<digest12> ($tag)"
[ "$(docker image inspect -f '{{.Id}}' "$named" 2>/dev/null)" = "$id1" ]
ok $? "and with the service's image: ($named)"
[ "$(exec_out w2/one app cat /ctx/copied.txt)" = "run $tmp" ]
ok $? "the COPY'd file is in the container"
[ "$(exec_out w2/one app sh -c 'ls /ctx/secrets /ctx/debug.log 2>&1 | grep -c "No such file"')" = 2 ] &&
	[ "$(exec_out w2/one app cat /ctx/keep.log)" = kept ]
ok $? ".dockerignore'd files are not (and its exception is)"
[ "$(exec_out w2/one app cat /ctx/greeting)" = hello ]
ok $? "build args reach the Dockerfile"
denv env versions w2/one >"$tmp/doc" 2>/dev/null
[ "$(py "[s for s in d['versions'][-1]['Spec']['services'] if s['name'] == 'app'][0]['image']")" = "$id1" ]
ok $? "the version pins the built image's id"

# ---- the same context again: cached, not uploaded, no build ----
run deploy --project w2 --env two -f "$tmp/proj/compose.yaml"
ok $rc "a second deploy of the unchanged context succeeds (exit $rc)"
grep -q '^build: service app: context ./app packed .*, already on the server$' "$tmp/err"
ok $? "the context is not uploaded again"
doc_of "$(dep_of_out)"
[ "$(py "$builds[0]['cached']")" = True ] && [ "$(py "$builds[0]['image_id']")" = "$id1" ]
ok $? "prepare says cached: true, the same image id"
[ "$(py "$builds[0]['builder']")" = cache ]
ok $? "  and names no builder but the cache"
# A build needs the archive on the host; after a build it is removed, and a
# cached image makes the control plane send nothing: none is there now.
[ -z "$(ls "$tmp/data/contexts" 2>/dev/null)" ]
ok $? "and no build ran: the host was sent no context"

# ---- the Python client packs the same way ----
pyc() { PYTHONPATH="$top/python" "$top/python/.venv/bin/python" -c "$1" >"$tmp/out" 2>"$tmp/err"; }
pyc "
import json
from pathlib import Path
from denv import Client
c = Client()
dep = c.deploy('w2', Path('$tmp/proj/compose.yaml'), env='py')
print(json.dumps(c.deployment(dep['ID'])))"
ok $? "Client.deploy(Path) packs the context relative to the compose file and deploys"
cp "$tmp/out" "$tmp/doc"
echo "$(py "$builds[0]['image']")" >>"$tmp/images"
# Its tar is its own (Python's tarfile), so its digest need not be the CLI's.
[ "$(exec_out w2/py app cat /ctx/copied.txt)" = "run $tmp" ] &&
	[ "$(exec_out w2/py app sh -c 'ls /ctx/secrets /ctx/debug.log 2>&1 | grep -c "No such file"')" = 2 ] &&
	[ "$(exec_out w2/py app cat /ctx/keep.log)" = kept ]
ok $? "  with the same files in and out"
mkdir -p "$tmp/sbx"
printf 'FROM denv-test/busybox:latest\nCOPY hello /hello\n' >"$tmp/sbx/Dockerfile"
echo "sandbox $tmp" >"$tmp/sbx/hello"
pyc "
from denv import Client
c = Client()
s = c.sandbox(build='$tmp/sbx', cmd=['sleep', 'infinity'], project='w2', name='sbx-build')
print(c.exec(s.id, 'sandbox', ['cat', '/hello']).stdout.strip())"
[ "$(cat "$tmp/out")" = "sandbox $tmp" ]
ok $? "Client.sandbox(build=DIR) builds the directory and runs it"
denv env versions w2/sbx-build >"$tmp/doc" 2>/dev/null
echo "$(py "[s for s in d['versions'][-1]['Spec']['services']][0]['build']['tag']")" >>"$tmp/images"

# ---- a fork runs the pinned image ----
run fork w2/one --name one-fork
ok $rc "the built version forks (exit $rc)"
[ "$(exec_out w2/one-fork app cat /ctx/copied.txt)" = "run $tmp" ]
ok $? "the fork runs the built image"

# ---- a rollback of the built version runs the pinned image too ----
denv env versions w2/one >"$tmp/doc" 2>/dev/null
ver1=$(py "d['versions'][-1]['ID']")
run rollback w2/one "$ver1"
ok $rc "the built version rolls back (exit $rc)"
[ "$(exec_out w2/one app cat /ctx/copied.txt)" = "run $tmp" ] && [ -z "$(ls "$tmp/data/contexts" 2>/dev/null)" ]
ok $? "  on the built image, with no context sent for it"

# ---- a failing build fails prepare with the log's tail ----
mkdir -p "$tmp/bad/ctx"
printf 'FROM denv-test/busybox:latest\nRUN echo the build says why >&2; false\n' >"$tmp/bad/ctx/Dockerfile"
echo "$tmp" >"$tmp/bad/ctx/unique"
printf 'services:\n  bad:\n    build: ctx\n    command: [sleep, infinity]\n' >"$tmp/bad/compose.yaml"
run deploy --project w2 --env bad -f "$tmp/bad/compose.yaml"
[ "$rc" = 1 ]
ok $? "a failing Dockerfile fails the deploy (exit $rc)"
grep -q '^  prepare    failed    .*service "bad": docker build failed (exit [0-9]*): .*the build says why' "$tmp/out"
ok $? "prepare's error names the service and quotes the build log's tail"
grep '^  prepare    failed' "$tmp/out" | sed 's/^/# /'

# ---- a context over one transfer's 32 MiB goes in parts ----
mkdir -p "$tmp/large/ctx"
printf 'FROM denv-test/busybox:latest\nCOPY blob /blob\n' >"$tmp/large/ctx/Dockerfile"
head -c 41943040 /dev/urandom >"$tmp/large/ctx/blob"
printf 'services:\n  large:\n    build: ./ctx\n    command: [sleep, infinity]\n' >"$tmp/large/compose.yaml"
run deploy --project w2 --env large -f "$tmp/large/compose.yaml"
ok $rc "a 40 MiB context deploys (exit $rc)"
doc_of "$(dep_of_out)"
echo "$(py "$builds[0]['image']")" >>"$tmp/images"
[ "$(exec_out w2/large large sh -c 'wc -c < /blob')" = 41943040 ] &&
	[ "$(exec_out w2/large large sha256sum /blob | cut -d' ' -f1)" = "$(sha256sum "$tmp/large/ctx/blob" | cut -d' ' -f1)" ]
ok $? "its file arrived whole (two parts)"
rm -rf "$tmp/large"

# ---- the docker CLI stays the fallback (DENVD_BUILD_CLI=1 forces it) ----
# and the first sweep after a start prunes built images no version pins.
# An image as this host's build would have made it, pinned by nothing; and one
# labelled for another data directory (another denvd's: never ours to remove).
mkdir -p "$tmp/orphan"
echo 'FROM denv-test/busybox:latest' >"$tmp/orphan/Dockerfile"
orphan="denv-build/orphan:$(basename "$tmp" | tr 'A-Z.' 'a-z-')"
other="denv-build/other:$(basename "$tmp" | tr 'A-Z.' 'a-z-')"
echo "$orphan" >>"$tmp/images"
echo "$other" >>"$tmp/images"
DOCKER_BUILDKIT=0 docker build -q -t "$orphan" --label "ai.denv.build=$orphan" --label "ai.denv.data=$tmp/data" \
	"$tmp/orphan" >/dev/null 2>&1 &&
	DOCKER_BUILDKIT=0 docker build -q -t "$other" --label "ai.denv.build=$other" \
		--label "ai.denv.data=$tmp/elsewhere" "$tmp/orphan" >/dev/null 2>&1
ok $? "an unpinned built image of this host's and one of another data directory's"
kill "$stack_sc_pid" 2>/dev/null && wait "$stack_sc_pid" 2>/dev/null
DENVD_BUILD_IMAGE_KEEP_SEC=0 DENVD_BUILD_CLI=1 "$top/bin/denvd" run --server "$DENV_SERVER" --state "$tmp/host.json" --data "$tmp/data" \
	--probe-url http://192.0.2.1/ >>"$tmp/denvd.log" 2>&1 &
stack_sc_pid=$!
n=0
until denv host list 2>/dev/null | grep -q '"connected": true'; do
	n=$((n + 1)); [ $n -lt 100 ] || break; sleep 0.2
done
n=0
while docker image inspect "$orphan" >/dev/null 2>&1 && [ $n -lt 40 ]; do n=$((n + 1)); sleep 0.5; done
! docker image inspect "$orphan" >/dev/null 2>&1
ok $? "the sweep after the start removed the built image no version pins"
docker image inspect "$other" >/dev/null 2>&1 && [ "$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null)" = "$id1" ] &&
	grep -q "built image .* ($orphan) removed: no version on this host pins it" "$tmp/denvd.log"
ok $? "  and kept the pinned one ($tag) and the other data directory's"
mkdir -p "$tmp/cli/ctx"
printf 'FROM denv-test/busybox:latest\nCOPY note /note\n' >"$tmp/cli/ctx/Dockerfile"
echo "cli $tmp" >"$tmp/cli/ctx/note"
printf 'services:\n  viacli:\n    build: ./ctx\n    command: [sleep, infinity]\n' >"$tmp/cli/compose.yaml"
run deploy --project w2 --env viacli -f "$tmp/cli/compose.yaml"
ok $rc "with DENVD_BUILD_CLI=1 a build deploys too (exit $rc)"
doc_of "$(dep_of_out)"
echo "$(py "$builds[0]['image']")" >>"$tmp/images"
[ "$(py "$builds[0]['builder']")" = docker-cli ] && [ "$(exec_out w2/viacli viacli cat /note)" = "cli $tmp" ]
ok $? "  through \`docker build -\` (builder docker-cli), the same image contents"
printf 'services:\n  bad:\n    build: ctx\n    command: [sleep, infinity]\n' >"$tmp/bad/compose.yaml"
echo "cli" >>"$tmp/bad/ctx/unique"
run deploy --project w2 --env badcli -f "$tmp/bad/compose.yaml"
grep -q '^  prepare    failed    .*service "bad": docker build failed (exit [0-9]*): .*the build says why' "$tmp/out"
ok $? "  and a failing build reads the same through the CLI"

# ---- over the limit: refused before anything is sent ----
mkdir -p "$tmp/big/ctx"
echo 'FROM denv-test/busybox:latest' >"$tmp/big/ctx/Dockerfile"
truncate -s 257M "$tmp/big/ctx/blob"
printf 'services:\n  huge:\n    build: ./ctx\n' >"$tmp/big/compose.yaml"
run deploy --project w2 --env big -f "$tmp/big/compose.yaml"
[ "$rc" != 0 ] && grep -q 'service "huge": build context .*/big/ctx is 257.0 MiB packed, over the 256 MiB limit' "$tmp/err"
ok $? "a context over 256 MiB is refused, naming the service and the size"
rm -f "$tmp/big/ctx/blob"

# ---- the control plane collects stored contexts no version names ----
kill "$stack_cp_pid" 2>/dev/null && wait "$stack_cp_pid" 2>/dev/null
DENV_CONTEXT_SWEEP_SEC=1 DENV_BOOTSTRAP_KEY=$DENV_API_KEY "$top/bin/denv-cp" -addr "${DENV_SERVER#http://}" \
	-db "$tmp/store" -context-keep 2s >>"$tmp/cp.log" 2>&1 &
stack_cp_pid=$!
n=0
until grep -q 'stored build context(s) no version names removed' "$tmp/cp.log" || [ $n -gt 40 ]; do
	n=$((n + 1)); sleep 0.5
done
[ "$(api "$DENV_SERVER/v1/contexts/$sum")" = 404 ] && [ -z "$(ls "$tmp"/store/contexts/*/"$sum".tar 2>/dev/null)" ]
ok $? "a stored context no version names is removed once unused for -context-keep (2s)"
[ -n "$(ls "$tmp"/store/contexts/*/"$ctx1".tar 2>/dev/null)" ] && [ "$(api "$DENV_SERVER/v1/contexts/$ctx1")" = 200 ]
ok $? "  one a version names is kept"

for e in one two py sbx-build one-fork bad large viacli badcli; do denv env destroy "w2/$e" >/dev/null 2>&1; done
for e in one two py sbx-build one-fork bad large viacli badcli; do stack_wait_destroyed "w2/$e"; done
suite_done
