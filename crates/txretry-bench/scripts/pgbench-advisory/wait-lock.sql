-- The waiting form (a busy key; before this change, every attempt): the wait at session
-- level in a short transaction, then the transaction-level lock.
\set aid random(1, 100000 * :scale)
BEGIN ISOLATION LEVEL READ COMMITTED\; SET LOCAL lock_timeout = '5000ms'\; SELECT pg_advisory_lock(:aid)\; COMMIT\; BEGIN\; SELECT pg_advisory_xact_lock(:aid)\; SELECT pg_advisory_unlock(:aid);
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
COMMIT;
