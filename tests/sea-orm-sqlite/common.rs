//! Shared setup: a database file per test, SeaORM connections to it that never wait for a
//! lock (busy_timeout 0, so a held lock is `SQLITE_BUSY` at once), and policies that record
//! retries. Table names are fixed (one file per test); values are numbers.

use std::time::Duration;

use sea_orm::sqlx::sqlite::SqliteJournalMode;
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DatabaseTransaction, DbErr,
    Statement, TryGetable,
};
use tempfile::TempDir;
use txretry::RetryPolicy;

pub use txretry_testkit::record::Seen;
pub use txretry_testkit::wait::within;

/// A fresh database file (removed with the `TempDir`) and a SeaORM pool of
/// `max_connections` on it, in WAL mode.
pub async fn setup(max_connections: u32) -> (TempDir, DatabaseConnection) {
    let dir = tempfile::tempdir().unwrap();
    let db = connect(&dir, max_connections).await;
    (dir, db)
}

/// Another pool on the same file: another writer.
pub async fn connect(dir: &TempDir, max_connections: u32) -> DatabaseConnection {
    let path = dir.path().join("shop.db");
    let mut options = ConnectOptions::new(format!("sqlite://{}?mode=rwc", path.display()));
    options
        .max_connections(max_connections)
        .sqlx_logging(false)
        .map_sqlx_sqlite_opts(|opts| {
            opts.busy_timeout(Duration::ZERO)
                .journal_mode(SqliteJournalMode::Wal)
        });
    Database::connect(options).await.unwrap()
}

/// Runs SQL (no parameters) on a connection or a transaction.
pub async fn exec(db: &impl ConnectionTrait, sql: &str) {
    db.execute_unprepared(sql).await.unwrap();
}

/// A one-row counter at 0, for transactions that read it and write it back plus one: two
/// of them side by side lose an update unless one is rolled back and run again.
pub async fn counter(db: &DatabaseConnection) {
    exec(
        db,
        "CREATE TABLE counter (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)",
    )
    .await;
    exec(db, "INSERT INTO counter VALUES (1, 0)").await;
}

/// The counter, read inside a transaction (a read can be busy too: it fails the attempt).
pub async fn read_counter(tx: &DatabaseTransaction) -> Result<i64, DbErr> {
    let read = Statement::from_string(tx.get_database_backend(), "SELECT v FROM counter");
    tx.query_one_raw(read)
        .await?
        .ok_or(DbErr::RecordNotFound("counter".into()))?
        .try_get_by_index(0)
}

/// Sets the counter to `v` inside a transaction.
pub async fn write_counter(tx: &DatabaseTransaction, v: i64) -> Result<(), DbErr> {
    tx.execute_unprepared(&format!("UPDATE counter SET v = {v}"))
        .await
        .map(drop)
}

/// The one value `sql` returns.
pub async fn scalar<T: TryGetable>(db: &impl ConnectionTrait, sql: &str) -> T {
    let statement = Statement::from_string(db.get_database_backend(), sql);
    let row = db.query_one_raw(statement).await.unwrap().expect("one row");
    row.try_get_by_index(0).unwrap()
}

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at 50 ms with full jitter; records retries.
pub fn policy(attempts: u32, seen: &Seen) -> RetryPolicy {
    txretry_testkit::record::jittered(attempts, Duration::from_millis(50), seen)
}
