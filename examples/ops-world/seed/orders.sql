-- The orders of the ops world: 100 paid orders. Orders 3, 11, 19, ... (id
-- mod 8 = 3) have asked for a refund; warm.sh puts them on the queue.
\set ON_ERROR_STOP on
DROP TABLE IF EXISTS orders;
CREATE TABLE orders (
	id integer PRIMARY KEY,
	customer text NOT NULL,
	amount_cents integer NOT NULL CHECK (amount_cents > 0),
	status text NOT NULL DEFAULT 'paid' CHECK (status IN ('paid', 'refunded'))
);
INSERT INTO orders (id, customer, amount_cents)
	SELECT i, 'customer-' || (i % 17), 500 + (i * 37) % 9500
	FROM generate_series(1, 100) AS i;
