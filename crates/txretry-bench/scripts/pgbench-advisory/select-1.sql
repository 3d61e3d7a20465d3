-- One more statement in BEGIN's message, taking no lock: what a statement alone costs.
\set aid random(1, 100000 * :scale)
BEGIN\; SELECT 1;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
COMMIT;
