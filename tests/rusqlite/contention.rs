//! The transfers of `tests/shared/transfers.rs` on a temp-file WAL database, each worker
//! on a connection of its own (the blocking runner on tokio's blocking threads), with
//! DEFERRED and with IMMEDIATE transactions.
//!
//! busy_timeout is 0 on every connection: each conflict surfaces as SQLITE_BUSY (5) or
//! SQLITE_BUSY_SNAPSHOT (517) and goes through the runner's rollback-and-retry, which is
//! what this test is about. (In production IMMEDIATE with a busy_timeout of a few seconds
//! lets writers queue inside SQLite; the runner is then the backstop. A DEFERRED
//! read-then-write transaction gains nothing from a busy timeout: once another writer
//! commits, its snapshot is stale and only a restart helps.)

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rusqlite::Connection;
use txretry::{RetryPolicy, SqliteBegin, TxOptions};

use crate::common::Db;
use crate::transfers::{Bank, Dialect, Run, Sql, Transfer, on_blocking_thread, transfers};

/// rusqlite for the transfers: the database file; each worker opens a connection, which
/// goes to a blocking thread for each transaction and comes back.
struct SqliteBank(Db);

impl Bank for SqliteBank {
    const DIALECT: Dialect = Dialect::Sqlite;
    type Worker = Option<Connection>;

    async fn worker(&self) -> Option<Connection> {
        Some(self.0.open())
    }

    async fn exec(&self, sql: String) {
        self.0.open().execute_batch(&sql).unwrap();
    }

    async fn query_i64(&self, sql: String) -> i64 {
        self.0.open().query_row(&sql, [], |row| row.get(0)).unwrap()
    }

    async fn transfer(
        worker: &mut Option<Connection>,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: Arc<Sql>,
        t: Transfer,
        runs: Arc<AtomicU32>,
    ) -> Result<(), String> {
        let (policy, options) = (policy.clone(), options.clone());
        on_blocking_thread(worker, move |conn| {
            txretry::rusqlite::transaction_with(conn, &policy, &options, |tx| {
                runs.fetch_add(1, Ordering::Relaxed);
                if let Some(prelude) = sql.prelude {
                    tx.execute_batch(prelude)?;
                }
                let balance: i64 = tx.query_row(&sql.balance, [t.src], |row| row.get(0))?;
                tx.execute(&sql.debit, [balance - t.amount, t.src])?;
                tx.execute(&sql.credit, [t.amount, t.dst])?;
                tx.execute(&sql.record, [t.task, t.seq, t.src, t.dst, t.amount])?;
                Ok::<_, rusqlite::Error>(())
            })
            .map_err(|err| err.to_string())
        })
        .await
    }

    async fn read(
        worker: &mut Option<Connection>,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: String,
    ) -> Result<i64, String> {
        let (policy, options) = (policy.clone(), options.clone());
        on_blocking_thread(worker, move |conn| {
            txretry::rusqlite::transaction_with(conn, &policy, &options, |tx| {
                tx.query_row(&sql, [], |row| row.get::<_, i64>(0))
            })
            .map_err(|err| err.to_string())
        })
        .await
    }
}

async fn contention(name: &'static str, begin: SqliteBegin) {
    let run = Run::sqlite(name, begin);
    transfers(SqliteBank(Db::wal()), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_transfers_all_commit_once_with_deferred() {
    contention("rusqlite DEFERRED", SqliteBegin::Deferred).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_transfers_all_commit_once_with_immediate() {
    contention("rusqlite IMMEDIATE", SqliteBegin::Immediate).await;
}
