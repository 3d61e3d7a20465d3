-- No admission: the transaction the lab's no-contention cells run, one row of 100 000.
\set aid random(1, 100000 * :scale)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
COMMIT;
