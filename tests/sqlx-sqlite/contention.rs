//! The transfers of `tests/shared/transfers.rs` on a temp-file WAL database.
//!
//! DEFERRED runs with busy_timeout 0 (a busy timeout cannot cure its failures anyway:
//! a reader that wants to write gets BUSY / BUSY_SNAPSHOT at once). IMMEDIATE runs with a
//! short busy timeout, as it would in production: writers mostly queue in SQLite, and the
//! runner retries the BEGINs that still time out.

use std::time::Duration;

use txretry::SqliteBegin;

use crate::common::TempDb;
use crate::transfers::{Dialect, Run, transfers};

crate::bank::sqlx_bank!(sqlx::SqlitePool, Dialect::Sqlite);

async fn contention(name: &'static str, begin: SqliteBegin, busy_timeout: Duration) {
    let db = TempDb::new().await;
    let run = Run::sqlite(name, begin);
    transfers(SqlxBank(db.pool(8, busy_timeout).await), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_deferred() {
    contention(
        "sqlx, sqlite DEFERRED",
        SqliteBegin::Deferred,
        Duration::ZERO,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_immediate() {
    let busy_timeout = Duration::from_millis(5);
    contention(
        "sqlx, sqlite IMMEDIATE",
        SqliteBegin::Immediate,
        busy_timeout,
    )
    .await;
}
