#!/bin/sh
# cp-api-pg.sh: the REST API suite (t/cp/test_api.py) with the store on a
# throw-away PostgreSQL cluster (t/lib/pg-suite.sh).
exec sh "${DENV_TOP:-$PWD}/t/lib/pg-suite.sh" test_api.py
