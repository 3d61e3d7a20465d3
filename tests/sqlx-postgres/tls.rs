//! Over TLS (`sslmode=require`): a runner dropped while its statement runs gives its pool
//! slot back, at once. sqlx returns such a connection through a ping; when the ping reads
//! the dropped statement's error, sqlx closes the connection hard, and its rustls socket
//! flushes first — a flush that, with nothing left to send, waits for the server to speak.
//! An idle server never does: the slot stayed taken for good, and a pool of one timed out.
//! The runner then closed a connection dropped inside an attempt gracefully, and that
//! close's flush waits for the busy server alike, up to sqlx's 5 s bound. It now drops the
//! connection at once.

use std::str::FromStr;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgSslMode};
use txretry::RetryPolicy;
use txretry_testkit::wait::poll_until;

use crate::common::{setup, within};

/// A pool of one TLS connection whose workers wait at most `acquire` for it, a second pool
/// for looking on, and the first's backend pid; `None` without a server (or, unless the
/// run requires one, without TLS on it).
async fn tls_pools(test: &str, acquire: Duration) -> Option<(PgPool, PgPool, i32)> {
    let (url, direct) = setup(test, 2).await?;
    let ssl: String = sqlx::query_scalar("SHOW ssl")
        .fetch_one(&direct)
        .await
        .unwrap();
    if ssl != "on" {
        assert!(
            !txretry_testkit::require_db(),
            "{test}: the server at TXRETRY_POSTGRES_URL has ssl = {ssl}; this test needs it on"
        );
        eprintln!("SKIPPED {test}: the server has ssl = {ssl}");
        return None;
    }
    let options = PgConnectOptions::from_str(&url)
        .unwrap()
        .ssl_mode(PgSslMode::Require);
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(acquire)
        .connect_with(options)
        .await
        .unwrap();
    let (pid, on_tls): (i32, bool) =
        sqlx::query_as("SELECT pid, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(on_tls, "the pool's connection is not on TLS");
    Some((pool, direct, pid))
}

/// Drops a runner on `pool` while its statement (backend `pid`) sleeps in the server.
async fn drop_mid_statement(pool: &PgPool, direct: &PgPool, pid: i32) {
    let run = txretry::sqlx::transaction(pool, &RetryPolicy::default(), async |tx| {
        sqlx::query("SELECT pg_sleep(60)")
            .execute(&mut **tx)
            .await
            .map(drop)
    });
    let sleeping = async {
        poll_until("the runner's statement never ran", async || {
            sqlx::query_scalar(
                "SELECT count(*) = 1 FROM pg_stat_activity \
                 WHERE pid = $1 AND state = 'active' AND query = 'SELECT pg_sleep(60)'",
            )
            .bind(pid)
            .fetch_one(direct)
            .await
            .unwrap()
        })
        .await;
    };
    tokio::select! {
        done = run => panic!("the runner ended while its statement slept: {done:?}"),
        () = sleeping => {} // `run` is dropped here, mid-statement
    }
}

#[tokio::test]
async fn a_runner_dropped_mid_statement_over_tls_gives_its_pool_slot_back() {
    let Some((pool, direct, pid)) = tls_pools("sqlx-postgres tls", Duration::from_secs(10)).await
    else {
        return;
    };
    drop_mid_statement(&pool, &direct, pid).await;
    // The statement ends with an error (57014) the dropped runner never reads; the
    // server is idle after it.
    let cancelled: bool = sqlx::query_scalar("SELECT pg_cancel_backend($1)")
        .bind(pid)
        .fetch_one(&direct)
        .await
        .unwrap();
    assert!(cancelled);

    // The pool's one slot comes back (the connection closed, a new one opened).
    let mut conn = within(pool.acquire())
        .await
        .expect("the pool's slot never came back");
    let (again, on_tls): (i32, bool) =
        sqlx::query_as("SELECT pid, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    assert!(on_tls);
    assert_ne!(again, pid, "the dropped attempt's connection was pooled");
    drop(conn);
    within(pool.close()).await;
}

/// With the server still busy with the dropped statement, the slot is free within the
/// pool's 2 s acquire timeout: a new connection, while the old backend still sleeps.
/// Under repeated timeouts, a pool's slots went to connections being closed.
#[tokio::test]
async fn a_runner_dropped_mid_statement_over_tls_frees_its_slot_at_once() {
    let Some((pool, direct, pid)) =
        tls_pools("sqlx-postgres tls slot", Duration::from_secs(2)).await
    else {
        return;
    };
    drop_mid_statement(&pool, &direct, pid).await;
    let again: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .expect("the pool's one slot was still held by the dropped connection");
    assert_ne!(again, pid, "the dropped attempt's connection was pooled");
    let _: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&direct)
        .await
        .unwrap();
    within(pool.close()).await;
}
