//! The transfers of `tests/shared/transfers.rs` at the server's default isolation
//! (REPEATABLE READ), reading with `SELECT … FOR UPDATE`: deadlocks (1213), each retried;
//! every transfer commits exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use mysql_async::Pool;
use mysql_async::prelude::*;
use txretry::{RetryPolicy, TxOptions};

use crate::common::{pool, url};
use crate::transfers::{Bank, Dialect, Run, Sql, Transfer, transfers};

/// mysql_async for the transfers: one pool, which every worker clones.
struct MySqlBank(Pool);

impl Bank for MySqlBank {
    const DIALECT: Dialect = Dialect::MySql;
    type Worker = Pool;

    async fn worker(&self) -> Pool {
        self.0.clone()
    }

    async fn exec(&self, sql: String) {
        self.0
            .get_conn()
            .await
            .unwrap()
            .query_drop(sql)
            .await
            .unwrap();
    }

    async fn query_i64(&self, sql: String) -> i64 {
        let mut conn = self.0.get_conn().await.unwrap();
        conn.query_first(sql).await.unwrap().expect("a row")
    }

    async fn transfer(
        pool: &mut Pool,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: Arc<Sql>,
        t: Transfer,
        runs: Arc<AtomicU32>,
    ) -> Result<(), String> {
        txretry::mysql_async::transaction_with(&*pool, policy, options, async move |tx| {
            runs.fetch_add(1, Ordering::Relaxed);
            if let Some(prelude) = sql.prelude {
                tx.query_drop(prelude).await?;
            }
            let balance: Option<i64> = tx.exec_first(&sql.balance, (t.src,)).await?;
            let balance = balance.expect("the account's row");
            tx.exec_drop(&sql.debit, (balance - t.amount, t.src))
                .await?;
            tx.exec_drop(&sql.credit, (t.amount, t.dst)).await?;
            let row = (t.task, t.seq, t.src, t.dst, t.amount);
            tx.exec_drop(&sql.record, row).await
        })
        .await
        .map_err(|err| err.to_string())
    }

    async fn read(
        pool: &mut Pool,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: String,
    ) -> Result<i64, String> {
        txretry::mysql_async::transaction_with(&*pool, policy, options, async move |tx| {
            let sum: Option<i64> = tx.query_first(&sql).await?;
            Ok::<_, mysql_async::Error>(sum.expect("a row"))
        })
        .await
        .map_err(|err| err.to_string())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_accounts_at_default_isolation() {
    let Some(url) = url("mysql_async::contention") else {
        return;
    };
    let run = Run::mysql_default("mysql_async, default isolation");
    let pool = pool(&url);
    transfers(MySqlBank(pool.clone()), run).await;
    pool.disconnect().await.unwrap();
}
