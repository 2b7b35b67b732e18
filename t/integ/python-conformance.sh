#!/bin/sh
# python-conformance.sh: the framework conformance suite (t/e2e-frameworks.sh)
# as part of make check; a missing prerequisite is a TAP skip-all, and checks the
# backend cannot do yet are SKIPs with their reason.
set -u
top=${DENV_TOP:-$PWD}
cd "$top" || exit 1
DENV_TOP="$top" DENV_E2E_TAP=1 exec sh "$top/t/e2e-frameworks.sh"
