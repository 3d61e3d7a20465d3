//! The transfers of `tests/shared/transfers.rs` through SeaORM on a WAL database file, with
//! DEFERRED transactions and busy_timeout 0: each conflict is `SQLITE_BUSY` (5) or
//! `SQLITE_BUSY_SNAPSHOT` (517) at once, retried; every transfer commits exactly once. (The
//! reader is not read-only: the runner refuses read-only SQLite transactions on SeaORM.)

use std::marker::PhantomData;

use txretry::{SqliteBegin, TxOptions};

use crate::bank::{OfDialect, SeaOrmBank};
use crate::common::setup;
use crate::transfers::{Dialect, Run, transfers};

struct Sqlite;

impl OfDialect for Sqlite {
    const DIALECT: Dialect = Dialect::Sqlite;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_deferred() {
    let (_dir, db) = setup(8).await;
    // Not read-only: the runner refuses read-only SQLite transactions on SeaORM.
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    let run = Run {
        reader: deferred,
        ..Run::sqlite("sea-orm, sqlite DEFERRED", SqliteBegin::Deferred)
    };
    transfers(SeaOrmBank::<Sqlite>(db, PhantomData), run).await;
}
