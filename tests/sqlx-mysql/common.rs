//! Shared setup: the server, a pool, per-test tables, and policies that record retries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, Connection, MySqlConnection};
use txretry::{Backoff, Classification, Jitter, RetryEvent, RetryPolicy};

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

/// What the policy's `on_retry` hook saw: `txretry::classify` of each real error that was
/// retried, with the failed attempt's number.
#[derive(Clone, Default)]
pub struct Seen(Arc<Mutex<Vec<(u32, Classification)>>>);

impl Seen {
    pub fn all(&self) -> Vec<(u32, Classification)> {
        self.0.lock().unwrap().clone()
    }

    fn record(&self, event: &RetryEvent<'_>) {
        self.0
            .lock()
            .unwrap()
            .push((event.attempt, txretry::classify(event.error)));
    }
}

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at 20 ms with full jitter; records retries.
pub fn policy(attempts: u32, seen: &Seen) -> RetryPolicy {
    let seen = seen.clone();
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(1),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(20))
        .jitter(Jitter::Full)
        .on_retry(move |event| seen.record(event))
        .build()
        .unwrap()
}

/// A guard against hangs in coordinated tests (not a timing assertion).
pub async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("test hung")
}
