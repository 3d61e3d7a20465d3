//! Shared setup: the server, a pool, per-test tables, and policies that record retries.

use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use txretry::{Code, RetryPolicy, SqlState};
use txretry_testkit::wait::poll_until;

/// A test's server URL and pool, or `None` when the test must skip (testkit printed why).
pub async fn setup(test: &str, max_connections: u32) -> Option<(String, PgPool)> {
    let url = txretry_testkit::postgres_url(test)?;
    let pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .connect(&url)
        .await
        .unwrap();
    Some((url, pool))
}

/// A plain session outside the pool (the "other" transaction).
pub async fn connect(url: &str) -> PgConnection {
    PgConnection::connect(url).await.unwrap()
}

/// A table name no concurrent test uses.
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// SQL with a table name spliced in. Names come from `unique_name` (ASCII letters, digits, `_`).
pub fn sql(text: String) -> AssertSqlSafe<String> {
    AssertSqlSafe(text)
}

/// Runs SQL (several statements allowed) on any executor.
pub async fn exec<'e>(executor: impl sqlx::PgExecutor<'e>, text: String) {
    sqlx::raw_sql(sql(text)).execute(executor).await.unwrap();
}

pub async fn drop_table(pool: &PgPool, name: &str) {
    exec(pool, format!("DROP TABLE IF EXISTS {name}")).await;
}

pub fn sqlstate(code: &str) -> Option<Code> {
    Some(Code::SqlState(SqlState::new(code).unwrap()))
}

pub use txretry_testkit::outcome::assert_permanent_once;
pub use txretry_testkit::record::Seen;
pub use txretry_testkit::wait::within;

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at `max_delay` with full jitter; records
/// retries.
pub fn policy_capped(attempts: u32, max_delay: Duration, seen: &Seen) -> RetryPolicy {
    txretry_testkit::record::jittered(attempts, max_delay, seen)
}

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at 50 ms with full jitter; records retries.
pub fn policy(attempts: u32, seen: &Seen) -> RetryPolicy {
    policy_capped(attempts, Duration::from_millis(50), seen)
}

/// The SQLSTATE of a sqlx error from Postgres, if it is a database error.
pub fn code_of(err: &sqlx::Error) -> Option<String> {
    err.as_database_error()
        .and_then(|db| db.code())
        .map(|code| code.into_owned())
}

/// Waits until session `pid` is blocked on a lock (`pg_stat_activity.wait_event_type =
/// 'Lock'`). Polls; panics after 30 s so a broken setup fails instead of hanging.
pub async fn wait_for_lock_wait(observer: &mut PgConnection, pid: i32) {
    poll_until(format!("session {pid} never waited for a lock"), async || {
        sqlx::query_scalar(
            "SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity WHERE pid = $1",
        )
        .bind(pid)
        .fetch_one(&mut *observer)
        .await
        .unwrap()
    })
    .await;
}
