#!/bin/sh
# warm.sh: x-denv.warm of the ops world, run in the db service after health.
# Loads the orders, then queues the refund backlog in Redis (service queue).
set -eu
psql -q -U postgres -v ON_ERROR_STOP=1 -f /seed/orders.sql
ids=$(psql -U postgres -tA -c "SELECT id FROM orders WHERE id % 8 = 3 ORDER BY id")
redis-cli -h queue DEL refunds >/dev/null
# shellcheck disable=SC2086
redis-cli -h queue RPUSH refunds $ids >/dev/null
echo "warm: $(echo $ids | wc -w) refunds queued" >&2
