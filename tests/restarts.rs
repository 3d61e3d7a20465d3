//! The server restarts in the middle of a runner's transaction, through a pool: a
//! Postgres and a MariaDB container of the test's own (txretry-testkit's
//! `RestartableServer`: fixed host port, clean shutdown, back once it accepts a login).
//! Ignored by the plain test run (it needs Docker, and a skipped test must not count as
//! passed); `.ci/containers` runs it with `--include-ignored` and
//! `TXRETRY_REQUIRE_RESTARTS=1`.
//!
//! What a restart does to a runner, as these tests show it:
//!
//! - **In the body** (after a write, before COMMIT): the server rolled the transaction
//!   back when it shut down, and the next statement fails on the dead session: a
//!   `Failover` verdict (Postgres' `57P01`) or a `Connection` one (the socket closed) in
//!   the Body phase. `RetryPolicy::default()` does not retry it (the error surfaces,
//!   nothing was written); a policy that opts in to both runs the transaction again on a
//!   fresh connection from the pool, and the rows are there once.
//! - **Between the last statement and COMMIT**: on Postgres the runner's `SELECT 1`
//!   before COMMIT meets the dead session, so it is a Body failure like the one above. On
//!   MariaDB COMMIT goes out on the dead session and fails: Ambiguous (the runner cannot
//!   know the server never saw it), never run again for a call not declared idempotent;
//!   nothing was written.
//! - **While COMMIT runs** (Postgres: a deferred trigger sleeping at COMMIT): the fast
//!   shutdown ends the session with `57P01`: Ambiguous, not run again, nothing written.
//! - **Afterwards** the same pool serves new transactions: sqlx tests an idle connection
//!   before lending it (its default), and the runner closes the broken one instead of
//!   returning it; mysql_async's pool likewise drops it.
//!
//! A `[[test]]` in Cargo.toml with every driver feature as `required-features`.

use sqlx::{AssertSqlSafe, ColumnIndex, Connection, Decode, Executor, Pool, Row, Type};
use txretry::{KindSet, Phase, RetryPolicy, StopReason, TransientKind, Verdict};
use txretry_testkit::RestartableServer;
use txretry_testkit::outcome::assert_outcome;
use txretry_testkit::record::{Seen, recording};
use txretry_testkit::wait::{poll_until, within};

/// SQL with a table name spliced in. Names come from `unique_name` (ASCII letters,
/// digits, `_`); values are literals the test wrote.
fn sql(text: String) -> AssertSqlSafe<String> {
    AssertSqlSafe(text)
}

/// Three attempts, retrying the default kinds (not `Connection` nor `Failover`).
fn default_kinds() -> (RetryPolicy, Seen) {
    let (policy, seen) = recording(3);
    (policy.build().unwrap(), seen)
}

/// Three attempts, retrying the default kinds and a lost session (`Connection`,
/// `Failover`), without a failover budget: a restart here is over before the retry.
fn with_connection() -> (RetryPolicy, Seen) {
    let (policy, seen) = recording(3);
    let kinds = KindSet::DEFAULT
        .with(TransientKind::Connection)
        .with(TransientKind::Failover);
    (policy.retry_on(kinds).build().unwrap(), seen)
}

/// The verdict of a session the restart ended: Postgres' `57P01` when the client read the
/// server's FATAL (`Failover`), a closed socket otherwise (`Connection`).
fn lost_session(verdict: Verdict) -> Verdict {
    assert!(
        matches!(verdict, Verdict::Transient(kind) if kind.loses_session()),
        "{verdict:?}"
    );
    verdict
}

/// Rows in `table`, counted on a new session (not the pool under test).
async fn count<DB>(url: &str, table: &str) -> i64
where
    DB: txretry::sqlx::Backend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    i64: Type<DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut conn = DB::Connection::connect(url).await.expect("connect");
    let row = sqlx::raw_sql(sql(format!("SELECT COUNT(*) FROM {table}")))
        .fetch_one(&mut conn)
        .await
        .expect("count rows");
    let n = row.try_get::<i64, usize>(0).expect("a count");
    let _ = conn.close().await;
    n
}

/// Runs `statement` on a new session.
async fn exec<DB>(url: &str, statement: String)
where
    DB: txretry::sqlx::Backend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    i64: Type<DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut conn = DB::Connection::connect(url).await.expect("connect");
    sqlx::raw_sql(sql(statement))
        .execute(&mut conn)
        .await
        .expect("statement");
    let _ = conn.close().await;
}

/// A runner transaction that inserts `ids` into `table`, restarting the server after the
/// first insert of its first attempt; with `restart_last`, the restart comes after the
/// last insert (the next thing on the wire is COMMIT). Returns the result and the number
/// of attempts the closure saw.
async fn insert_across_restart<DB>(
    server: &RestartableServer,
    pool: &Pool<DB>,
    policy: &RetryPolicy,
    table: &str,
    ids: &[i64],
    restart_last: bool,
) -> (Result<(), txretry::TxError<sqlx::Error>>, u32)
where
    DB: txretry::sqlx::Backend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    i64: Type<DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    let mut attempts = 0;
    let result = txretry::sqlx::transaction(pool, policy, async |tx| {
        attempts += 1;
        for (i, id) in ids.iter().enumerate() {
            sqlx::raw_sql(sql(format!("INSERT INTO {table} (id) VALUES ({id})")))
                .execute(&mut **tx)
                .await?;
            let restart_now = if restart_last {
                i + 1 == ids.len()
            } else {
                i == 0
            };
            if attempts == 1 && restart_now {
                server.restart().await;
            }
        }
        Ok::<_, sqlx::Error>(())
    })
    .await;
    (result, attempts)
}

/// The scenarios every sqlx pool goes through, on the server `pool` talks to.
/// `checks_before_commit`: the runner sends `SELECT 1` before COMMIT on this database
/// (Postgres; see `txretry::sqlx::transaction`).
async fn sqlx_pool_across_restarts<DB>(
    server: &RestartableServer,
    pool: &Pool<DB>,
    prefix: &str,
    checks_before_commit: bool,
) where
    DB: txretry::sqlx::Backend,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    i64: Type<DB> + for<'r> Decode<'r, DB>,
    usize: ColumnIndex<DB::Row>,
{
    let url = server.url();
    let t = txretry_testkit::unique_name(prefix);
    exec::<DB>(url, format!("CREATE TABLE {t} (id BIGINT PRIMARY KEY)")).await;
    // The pool holds an idle connection from before the first restart.
    txretry::sqlx::transaction(pool, &RetryPolicy::default(), async |tx| {
        sqlx::raw_sql(sql(format!("SELECT COUNT(*) FROM {t}")))
            .execute(&mut **tx)
            .await
    })
    .await
    .expect("a transaction before any restart");

    // (a) Restart after the first write: the second fails on the dead session.
    let (policy, seen) = default_kinds();
    let (result, attempts) = insert_across_restart(server, pool, &policy, &t, &[1, 2], false).await;
    let err = result.expect_err("the session died with the restart");
    eprintln!("{prefix}: restart in the body: {err:?}");
    assert_outcome(
        &err,
        lost_session(err.outcome().verdict()),
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty());
    assert_eq!(count::<DB>(url, &t).await, 0, "the shutdown rolled it back");

    // (b) The same pool serves the next transaction.
    txretry::sqlx::transaction(pool, &RetryPolicy::default(), async |tx| {
        sqlx::raw_sql(sql(format!("INSERT INTO {t} (id) VALUES (10)")))
            .execute(&mut **tx)
            .await
    })
    .await
    .expect("the pool recovered");
    assert_eq!(count::<DB>(url, &t).await, 1);

    // Opted in to a lost session: the transaction runs again on a fresh connection, and its
    // rows are there once (a second copy would fail on the primary key).
    let (policy, seen) = with_connection();
    let (result, attempts) =
        insert_across_restart(server, pool, &policy, &t, &[20, 21], false).await;
    result.expect("retried on a fresh connection");
    assert_eq!(attempts, 2);
    let judged = seen.judged();
    assert_eq!(judged.len(), 1, "{judged:?}");
    lost_session(judged[0].verdict);
    assert_eq!(judged[0].phase, Phase::Body);
    assert_eq!(count::<DB>(url, &t).await, 3, "10, 20 and 21, once each");

    // Restart after the last write, before COMMIT. The policy retries a lost session; the
    // call is not idempotent.
    let (policy, seen) = with_connection();
    let (result, attempts) = insert_across_restart(server, pool, &policy, &t, &[30], true).await;
    if checks_before_commit {
        // Postgres: the runner's `SELECT 1` before COMMIT meets the dead session, so COMMIT
        // is never sent: a Body failure, safe to run again, and row 30 is there once.
        result.expect("retried on a fresh connection");
        assert_eq!(attempts, 2);
        let judged = seen.judged();
        assert_eq!(judged.len(), 1, "{judged:?}");
        lost_session(judged[0].verdict);
        assert_eq!(judged[0].phase, Phase::Body);
        assert_eq!(count::<DB>(url, &t).await, 4, "row 30 once");
    } else {
        // MariaDB: COMMIT goes out on the dead session. Ambiguous (the runner cannot know
        // the server never saw it), so not run again.
        let err = result.expect_err("COMMIT on a dead session");
        eprintln!("{prefix}: restart before COMMIT: {err:?}");
        assert_outcome(
            &err,
            Verdict::Ambiguous,
            Phase::Commit,
            1,
            StopReason::NotRetryable,
        );
        assert_eq!(attempts, 1);
        assert!(seen.retried().is_empty());
        assert_eq!(
            count::<DB>(url, &t).await,
            3,
            "the server never saw COMMIT: row 30 is not there"
        );
    }
    let before = count::<DB>(url, &t).await;

    txretry::sqlx::transaction(pool, &RetryPolicy::default(), async |tx| {
        sqlx::raw_sql(sql(format!("INSERT INTO {t} (id) VALUES (40)")))
            .execute(&mut **tx)
            .await
    })
    .await
    .expect("the pool recovered again");
    assert_eq!(count::<DB>(url, &t).await, before + 1);
    exec::<DB>(url, format!("DROP TABLE {t}")).await;
}

/// Postgres: restarts through a sqlx pool, a restart while COMMIT runs, and a
/// tokio-postgres client across a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a restartable container: .ci/containers runs it"]
async fn postgres_restarts() {
    let Some(server) = RestartableServer::postgres("restarts::postgres").await else {
        return;
    };
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(server.url())
        .await
        .expect("a pool");
    within(sqlx_pool_across_restarts(&server, &pool, "rs_pg", true)).await;
    within(postgres_restart_during_commit(&server, &pool)).await;
    within(tokio_postgres_across_restart(&server)).await;
    pool.close().await;
}

/// A deferred trigger sleeps at COMMIT; the server restarts while it sleeps.
async fn postgres_restart_during_commit(server: &RestartableServer, pool: &sqlx::PgPool) {
    let url = server.url();
    let t = txretry_testkit::unique_name("rs_pg_commit");
    let sleeper = format!("{t}_sleep");
    exec::<sqlx::Postgres>(
        url,
        format!(
            "CREATE TABLE {t} (id BIGINT PRIMARY KEY);
             CREATE FUNCTION {sleeper}() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 PERFORM pg_sleep(600);
                 RETURN NULL;
             END $$;
             CREATE CONSTRAINT TRIGGER {t}_at_commit AFTER INSERT ON {t}
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {sleeper}();"
        ),
    )
    .await;

    let (policy, seen) = with_connection();
    let mut attempts = 0;
    let commit = txretry::sqlx::transaction(pool, &policy, async |tx| {
        attempts += 1;
        sqlx::raw_sql(sql(format!("INSERT INTO {t} (id) VALUES (1)")))
            .execute(&mut **tx)
            .await
    });
    let restart = async {
        let mut observer = sqlx::PgConnection::connect(url).await.expect("connect");
        poll_until("COMMIT never reached the sleeping trigger", async || {
            sqlx::query_scalar::<_, bool>(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity \
                 WHERE wait_event = 'PgSleep' AND query ILIKE 'COMMIT%')",
            )
            .fetch_one(&mut observer)
            .await
            .expect("poll pg_stat_activity")
        })
        .await;
        drop(observer);
        server.restart().await;
    };
    let (result, ()) = tokio::join!(commit, restart);
    let err = result.expect_err("the server went away during COMMIT");
    eprintln!("rs_pg: restart during COMMIT: {err:?}");
    assert_outcome(
        &err,
        Verdict::Ambiguous,
        Phase::Commit,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(attempts, 1, "an ambiguous COMMIT is not run again");
    assert!(seen.retried().is_empty());
    // The session died inside the trigger, before the commit record: nothing landed.
    assert_eq!(count::<sqlx::Postgres>(url, &t).await, 0);
    exec::<sqlx::Postgres>(url, format!("DROP TABLE {t}; DROP FUNCTION {sleeper}()")).await;
}

/// tokio-postgres has no pool: its client dies with the session, the runner stops (it
/// has no other connection), and a new client works.
async fn tokio_postgres_across_restart(server: &RestartableServer) {
    let url = server.url();
    let t = txretry_testkit::unique_name("rs_tp");
    exec::<sqlx::Postgres>(url, format!("CREATE TABLE {t} (id BIGINT PRIMARY KEY)")).await;
    let connect = async || {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(connection);
        client
    };
    let mut client = connect().await;
    let (policy, seen) = with_connection();
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        attempts += 1;
        tx.batch_execute(&format!("INSERT INTO {t} (id) VALUES (1)"))
            .await?;
        server.restart().await;
        tx.batch_execute(&format!("INSERT INTO {t} (id) VALUES (2)"))
            .await
    })
    .await
    .expect_err("the session died with the restart");
    eprintln!("rs_tp: restart in the body: {err:?}");
    assert_outcome(
        &err,
        lost_session(err.outcome().verdict()),
        Phase::Body,
        1,
        StopReason::ConnectionUnusable,
    );
    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty());
    assert_eq!(count::<sqlx::Postgres>(url, &t).await, 0);

    let mut client = connect().await;
    txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        tx.batch_execute(&format!("INSERT INTO {t} (id) VALUES (3)"))
            .await
    })
    .await
    .expect("a new client works");
    assert_eq!(count::<sqlx::Postgres>(url, &t).await, 1);
    exec::<sqlx::Postgres>(url, format!("DROP TABLE {t}")).await;
}

/// MariaDB: restarts through a sqlx pool and a mysql_async pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a restartable container: .ci/containers runs it"]
async fn mariadb_restarts() {
    let Some(server) = RestartableServer::mariadb("restarts::mariadb").await else {
        return;
    };
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(2)
        .connect(server.url())
        .await
        .expect("a pool");
    within(sqlx_pool_across_restarts(&server, &pool, "rs_my", false)).await;
    pool.close().await;
    within(mysql_async_pool_across_restart(&server)).await;
}

/// mysql_async: a restart in the body fails with `Connection`; the pool serves the next
/// transaction.
async fn mysql_async_pool_across_restart(server: &RestartableServer) {
    use mysql_async::prelude::Queryable;

    let url = server.url();
    let t = txretry_testkit::unique_name("rs_ma");
    exec::<sqlx::MySql>(url, format!("CREATE TABLE {t} (id BIGINT PRIMARY KEY)")).await;
    // Without `prefer_socket=false`, mysql_async asks the server for its socket path and
    // moves to that path on this machine: another server's socket, not the container's.
    let pool = mysql_async::Pool::new(format!("{url}?prefer_socket=false").as_str());
    let (policy, seen) = default_kinds();
    let mut attempts = 0;
    let err = txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        tx.query_drop(format!("INSERT INTO {t} (id) VALUES (1)"))
            .await?;
        server.restart().await;
        tx.query_drop(format!("INSERT INTO {t} (id) VALUES (2)"))
            .await
    })
    .await
    .expect_err("the session died with the restart");
    eprintln!("rs_ma: restart in the body: {err:?}");
    assert_outcome(
        &err,
        lost_session(err.outcome().verdict()),
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty());
    assert_eq!(count::<sqlx::MySql>(url, &t).await, 0);

    txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        tx.query_drop(format!("INSERT INTO {t} (id) VALUES (3)"))
            .await
    })
    .await
    .expect("the pool recovered");
    assert_eq!(count::<sqlx::MySql>(url, &t).await, 1);
    pool.disconnect().await.expect("disconnect");
    exec::<sqlx::MySql>(url, format!("DROP TABLE {t}")).await;
}
