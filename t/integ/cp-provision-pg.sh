#!/bin/sh
# cp-provision-pg.sh: the cloud provisioning suite (t/cp/test_provision.py) with the store on a
# throw-away PostgreSQL cluster (t/lib/pg-suite.sh).
exec sh "${DENV_TOP:-$PWD}/t/lib/pg-suite.sh" test_provision.py
