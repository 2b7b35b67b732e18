#!/bin/sh
# denvd-session.sh: denvd's session, command log and install verb against a
# fake control plane (t/sidecar/fakecp.py). Prints TAP.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_denvd
suite_need_docker busybox
suite_tmp denvd-session
"$py" "$top/t/sidecar/test_session.py" "$bin" "$tmp"
