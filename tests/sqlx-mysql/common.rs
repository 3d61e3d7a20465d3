//! Shared setup: the server, a pool, per-test tables, and policies that record retries.

use std::time::Duration;

use sqlx::mysql::{MySqlDatabaseError, MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, Connection, MySqlConnection};
use txretry::RetryPolicy;

/// A test's server URL and pool, or `None` when the test must skip (testkit printed why).
pub async fn setup(test: &str, max_connections: u32) -> Option<(String, MySqlPool)> {
    let url = txretry_testkit::mysql_url(test)?;
    let pool = MySqlPoolOptions::new()
        .max_connections(max_connections)
        .connect(&url)
        .await
        .unwrap();
    Some((url, pool))
}

/// A plain session outside the pool (the "other" transaction).
pub async fn connect(url: &str) -> MySqlConnection {
    MySqlConnection::connect(url).await.unwrap()
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
pub async fn exec<'e>(executor: impl sqlx::MySqlExecutor<'e>, text: String) {
    sqlx::raw_sql(sql(text)).execute(executor).await.unwrap();
}

pub async fn drop_table(pool: &MySqlPool, name: &str) {
    exec(pool, format!("DROP TABLE IF EXISTS {name}")).await;
}

pub use txretry_testkit::outcome::assert_permanent_once;
pub use txretry_testkit::record::Seen;

/// The MySQL errno of a sqlx error, if it is a database error from MySQL / MariaDB.
pub fn errno(err: &sqlx::Error) -> Option<u16> {
    err.as_database_error()
        .and_then(|db| db.try_downcast_ref::<MySqlDatabaseError>())
        .map(MySqlDatabaseError::number)
}

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at 20 ms with full jitter; records retries.
pub fn policy(attempts: u32, seen: &Seen) -> RetryPolicy {
    txretry_testkit::record::jittered(attempts, Duration::from_millis(20), seen)
}
