//! The transfers of `tests/shared/transfers.rs` through Diesel (blocking) on a WAL
//! database file, each worker on a `SqliteConnection` of its own with busy_timeout 0, with
//! DEFERRED and with IMMEDIATE transactions: `SQLITE_BUSY`, recovered from Diesel's text,
//! retried; every transfer commits exactly once.

use std::sync::Arc;

use txretry::SqliteBegin;

use crate::common::Db;
use crate::transfers::{Dialect, Run, transfers};

crate::bank::diesel_bank!(diesel::SqliteConnection, Dialect::Sqlite);

async fn contention(name: &'static str, begin: SqliteBegin) {
    let db = Arc::new(Db::wal());
    let run = Run::sqlite(name, begin);
    transfers(DieselBank(Arc::new(move || db.open())), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_transfers_all_commit_once_with_deferred() {
    contention("diesel, sqlite DEFERRED", SqliteBegin::Deferred).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_transfers_all_commit_once_with_immediate() {
    contention("diesel, sqlite IMMEDIATE", SqliteBegin::Immediate).await;
}
