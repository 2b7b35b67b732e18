#!/bin/sh
# harbor-tasks.sh: `harbor run -a oracle -e denv.harbor:DenvEnvironment -k 2`
# over t/fixtures/harbor (the layouts `harbor init` writes: shared and separate
# verifier, Dockerfile-only, docker_image with caps, a two-service compose task,
# a build that fails, a GPU task denv refuses) against a real denv-cp and denvd
# (t/e2e-frameworks.sh starts them). Buildable tasks score 1 on both attempts;
# the other two fail only their own trials, with the reason; the second attempt
# of each buildable task forks the first one's prepared version.
# DENV_E2E_HARBOR_N=1: one trial at a time (default 2 at once).
set -u
top=${DENV_TOP:-$PWD}
cd "$top" || exit 1
DENV_TOP="$top" DENV_E2E_TAP=1 exec sh "$top/t/e2e-frameworks.sh" harbor_tasks
