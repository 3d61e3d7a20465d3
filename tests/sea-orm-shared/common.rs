//! Shared setup of the sea-orm-postgres and sea-orm-mysql binaries: a SeaORM connection to
//! the binary's server (`dialect::server_url`), per-test tables, and policies that record
//! retries. Statements are plain SQL through SeaORM's `ConnectionTrait`; table names come
//! from `unique_name` (ASCII letters, digits, `_`) and values are numbers or fixed text.

use std::time::Duration;

use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, Statement, TryGetable,
};
use txretry::RetryPolicy;

pub use txretry_testkit::outcome::assert_permanent_once;
pub use txretry_testkit::record::Seen;
pub use txretry_testkit::wait::within;

/// A SeaORM connection (a pool of `max_connections`) to `url`.
pub async fn connect(url: &str, max_connections: u32) -> DatabaseConnection {
    let mut options = ConnectOptions::new(url);
    options.max_connections(max_connections).sqlx_logging(false);
    Database::connect(options).await.unwrap()
}

/// A test's server URL and connection, or `None` when the test must skip (testkit printed
/// why; with `TXRETRY_REQUIRE_DB=1` it panics instead).
pub async fn setup(test: &str, max_connections: u32) -> Option<(String, DatabaseConnection)> {
    let url = crate::dialect::server_url(test)?;
    let db = connect(&url, max_connections).await;
    Some((url, db))
}

/// A table name no concurrent test uses.
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// Runs SQL (no parameters) on a connection or a transaction.
pub async fn exec(db: &impl ConnectionTrait, sql: String) {
    db.execute_unprepared(&sql).await.unwrap();
}

/// The first column of every row `sql` returns.
pub async fn column<T: TryGetable>(db: &impl ConnectionTrait, sql: String) -> Vec<T> {
    let statement = Statement::from_string(db.get_database_backend(), sql);
    let rows = db.query_all_raw(statement).await.unwrap();
    rows.iter()
        .map(|row| row.try_get_by_index(0).unwrap())
        .collect()
}

/// The one value `sql` returns.
pub async fn scalar<T: TryGetable>(db: &impl ConnectionTrait, sql: String) -> T {
    let mut values = column(db, sql).await;
    assert_eq!(values.len(), 1, "one row");
    values.remove(0)
}

pub async fn drop_table(db: &DatabaseConnection, name: &str) {
    exec(db, format!("DROP TABLE IF EXISTS {name}")).await;
}

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at 50 ms with full jitter; records retries.
pub fn policy(attempts: u32, seen: &Seen) -> RetryPolicy {
    txretry_testkit::record::jittered(attempts, Duration::from_millis(50), seen)
}
