#!/bin/sh
# verify.sh: the ops world's grader. Runs in its own container on a fork of
# the world, after the agent is frozen; the agent's answer is under
# /submission. Reward 1 when every queued refund is done and nothing else:
# the queue is empty, exactly the 13 orders with id mod 8 = 3 are refunded,
# all 100 orders are still there, and answer.txt says 13.
set -u
want=13
reward=0
say() { echo "verify: $*"; }
q() { psql -h db -U postgres -tA -c "$1"; }
total=$(q "SELECT count(*) FROM orders") || total=error
refunded=$(q "SELECT count(*) FROM orders WHERE status = 'refunded'") || refunded=error
wrong=$(q "SELECT count(*) FROM orders WHERE (status = 'refunded') <> (id % 8 = 3)") || wrong=error
left=$(redis-cli -h queue LLEN refunds) || left=error
answer=$(cat /submission/home/ubuntu/answer.txt 2>/dev/null | tr -d ' \n')
say "orders $total, refunded $refunded, wrongly set $wrong, queue left $left, answer '${answer}'"
if [ "$total" = 100 ] && [ "$refunded" = $want ] && [ "$wrong" = 0 ] && [ "$left" = 0 ] && [ "$answer" = $want ]; then
	reward=1
fi
mkdir -p /logs/verifier
echo "$reward" >/logs/verifier/reward.txt
say "reward $reward"
