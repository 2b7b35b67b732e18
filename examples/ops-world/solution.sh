# solution.sh: a reference run of the ops world's task, as the agent would do
# it from opsbox (uid 1000): take each order id off the refund queue and
# refund it, then report how many orders stand refunded. Run it with
#   denv exec --service opsbox ENV -- sh -c "$(cat examples/ops-world/solution.sh)"
set -eu
n=0
while id=$(redis-cli -h "$REDIS_HOST" --raw LPOP refunds) && [ -n "$id" ]; do
	psql -q -v ON_ERROR_STOP=1 -c "UPDATE orders SET status = 'refunded' WHERE id = $id"
	n=$((n + 1))
done
psql -tA -c "SELECT count(*) FROM orders WHERE status = 'refunded'" >"$HOME/answer.txt"
echo "refunded $n orders, $(cat "$HOME/answer.txt") in all"
