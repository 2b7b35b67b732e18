#!/bin/sh
# cp-tokens-pg.sh: the provider token checks (t/cp/test_tokens.py) with the store on a
# throw-away PostgreSQL cluster (t/lib/pg-suite.sh).
exec sh "${DENV_TOP:-$PWD}/t/lib/pg-suite.sh" test_tokens.py
