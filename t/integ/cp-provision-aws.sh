#!/bin/sh
# cp-provision-aws.sh: denv-cp provisions on AWS against the fake EC2 Query
# API (t/fakes/ec2.py), whose cloud-init stand-in runs a real denvd join;
# t/cp/test_provision_aws.py prints the TAP. Loopback and Docker only.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/lib/denvd-suite.sh"
suite_need_bins denvd denv-cp
suite_need_websockets
suite_need_docker busybox
DENV_TOP="$top" exec "$py" "$top/t/cp/test_provision_aws.py"
