#!/bin/sh
# cp-hub-pg.sh: the host hub and orchestrator suite (t/cp/test_hub.py) with the store on a
# throw-away PostgreSQL cluster (t/lib/pg-suite.sh).
exec sh "${DENV_TOP:-$PWD}/t/lib/pg-suite.sh" test_hub.py
