-- What txretry::sqlx sends under Admission::in_database when the key is not busy: the
-- key's advisory lock tried in BEGIN's message (the key here is the row number).
\set aid random(1, 100000 * :scale)
BEGIN\; SELECT CAST(CASE WHEN pg_try_advisory_xact_lock(:aid) THEN '0' ELSE 'txretry admission: advisory lock is held by another session' END AS int);
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
COMMIT;
