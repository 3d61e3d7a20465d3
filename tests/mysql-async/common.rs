//! Shared helpers: pools, tables, a recording policy, lock-wait polling.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, Pool};
use txretry::{
    Backoff, Classification, Phase, RetryPolicy, RetryPolicyBuilder, StopReason, TxError, Verdict,
};

/// The server URL, or `None` when the test must skip (txretry-testkit printed why).
pub fn url(test: &str) -> Option<String> {
    txretry_testkit::mysql_url(test)
}

/// A pool of its own for one test.
pub fn pool(url: &str) -> Pool {
    Pool::new(url)
}

/// A pool of its own holding exactly one connection, which it keeps when idle
/// (`pool_min=1`: with a minimum of 0 mysql_async closes every returned connection) and
/// does not reset between uses (`reset_connection=false`): the session a test leaves
/// behind is the one the next caller gets, so a test can tell whether the runner pooled a
/// connection or closed it.
pub fn single_connection_pool(url: &str) -> Pool {
    let sep = if url.contains('?') { '&' } else { '?' };
    Pool::new(format!("{url}{sep}pool_min=1&pool_max=1&reset_connection=false").as_str())
}

/// The session's connection id (what `KILL` and `innodb_trx` name).
pub async fn connection_id<Q: Queryable>(conn: &mut Q) -> u64 {
    conn.query_first("SELECT CONNECTION_ID()")
        .await
        .expect("CONNECTION_ID()")
        .expect("a row")
}

/// Waits until session `id` is executing `statement` (`information_schema.processlist`).
/// Polls; panics after 30 s so a broken setup fails instead of hanging.
///
/// `information_schema.innodb_trx` would say "LOCK WAIT" directly, but InnoDB refreshes
/// that table only when nobody has read it for 100 ms, so polling it never sees a change.
pub async fn wait_for_statement(observer: &mut Conn, id: u64, statement: &str) {
    for _ in 0..3000 {
        let running: Option<i64> = observer
            .exec_first(
                "SELECT count(*) FROM information_schema.processlist WHERE id = ? AND info = ?",
                (id, statement),
            )
            .await
            .expect("poll processlist");
        if running == Some(1) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("session {id} never ran {statement}");
}

/// A unique table name (tests share one database and run in parallel).
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// `CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL) ENGINE=InnoDB` with rows
/// `1..=rows`, v = 0.
pub async fn create_rows(conn: &mut Conn, name: &str, rows: i32) {
    conn.query_drop(format!(
        "CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL) ENGINE=InnoDB"
    ))
    .await
    .expect("create table");
    conn.exec_batch(
        format!("INSERT INTO {name} (id, v) VALUES (?, 0)"),
        (1..=rows).map(|id| (id,)),
    )
    .await
    .expect("insert rows");
}

/// The value of row `id`.
pub async fn value(conn: &mut Conn, name: &str, id: i32) -> i64 {
    conn.exec_first(format!("SELECT v FROM {name} WHERE id = ?"), (id,))
        .await
        .expect("read row")
        .expect("the row exists")
}

/// `SELECT count(*)` of a table.
pub async fn count(conn: &mut Conn, name: &str) -> i64 {
    conn.query_first(format!("SELECT count(*) FROM {name}"))
        .await
        .expect("count")
        .expect("a row")
}

/// Drops the tables.
pub async fn drop_tables(conn: &mut Conn, names: &[&str]) {
    for name in names {
        conn.query_drop(format!("DROP TABLE IF EXISTS {name}"))
            .await
            .expect("drop table");
    }
}

/// What the policy's `on_retry` hook saw: the default classification of each real error
/// that was retried.
pub type Seen = Arc<Mutex<Vec<Classification>>>;

/// A policy builder with short constant backoff whose hook records `txretry::classify` of
/// every retried error.
pub fn recording(max_attempts: u32) -> (RetryPolicyBuilder, Seen) {
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    let builder = RetryPolicy::builder()
        .max_attempts(max_attempts)
        .backoff(Backoff::Constant(Duration::from_millis(10)))
        .on_retry(move |event| sink.lock().unwrap().push(txretry::classify(event.error)));
    (builder, seen)
}

/// The recorded classifications.
pub fn retried(seen: &Seen) -> Vec<Classification> {
    seen.lock().unwrap().clone()
}

/// The server error number, if `err` is a server error.
pub fn errno(err: &mysql_async::Error) -> Option<u16> {
    match err {
        mysql_async::Error::Server(server) => Some(server.code),
        _ => None,
    }
}

/// Asserts how a runner call that failed went: the last verdict, where it failed, how many
/// attempts ran, and why the loop stopped.
#[track_caller]
pub fn assert_outcome<E: std::fmt::Debug>(
    err: &TxError<E>,
    verdict: Verdict,
    phase: Phase,
    attempts: u32,
    stop: StopReason,
) {
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), verdict, "{err:?}");
    assert_eq!(outcome.phase(), phase, "{err:?}");
    assert_eq!(outcome.attempts(), attempts, "{err:?}");
    assert_eq!(outcome.stop_reason(), stop, "{err:?}");
    assert_eq!(
        outcome.may_have_committed(),
        verdict == Verdict::Ambiguous,
        "{err:?}"
    );
}

/// Whether session `id` still exists on the server (`information_schema.processlist`).
pub async fn session_exists(observer: &mut Conn, id: u64) -> bool {
    let n: Option<i64> = observer
        .exec_first(
            "SELECT count(*) FROM information_schema.processlist WHERE id = ?",
            (id,),
        )
        .await
        .expect("read processlist");
    n == Some(1)
}

/// Waits until session `id` is gone from the server. Polls; panics after 30 s, so a
/// connection that was pooled instead of closed fails the test instead of hanging it.
pub async fn wait_until_session_gone(observer: &mut Conn, id: u64) {
    for _ in 0..3000 {
        if !session_exists(observer, id).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("session {id} is still connected");
}
