//! The scenarios of `tests/shared/`: the transfers at the server's default isolation
//! (REPEATABLE READ), reading with `SELECT … FOR UPDATE` (deadlocks, 1213, each retried;
//! every transfer commits exactly once), and the deadlock and the lock-wait timeout of
//! `locks.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use mysql_async::prelude::*;
use mysql_async::{Conn, Pool};
use txretry::{RetryPolicy, TxOptions};

use crate::common::{pool, url};
use crate::locks::{Failure, Script, Sessions, Tx};
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

impl Tx for mysql_async::Transaction<'_> {
    type Error = mysql_async::Error;

    async fn exec(&mut self, sql: &str) -> Result<(), mysql_async::Error> {
        self.query_drop(sql).await
    }

    async fn one(&mut self, sql: &str) -> Result<i64, mysql_async::Error> {
        Ok(self.query_first(sql).await?.expect("a row"))
    }

    fn failure(err: &mysql_async::Error, in_tx: Option<i64>) -> Failure {
        let server = match err {
            mysql_async::Error::Server(server) => Some(server),
            _ => None,
        };
        Failure {
            sqlstate: server.map(|server| server.state.clone()),
            errno: server.map(|server| server.code),
            message: server.map_or_else(|| err.to_string(), |server| server.message.clone()),
            classified: txretry::classify(err),
            in_tx,
        }
    }
}

impl Sessions for MySqlBank {
    const KEEPS_ERRNO: bool = true;
    type Held = Conn;

    async fn begin(&self) -> Conn {
        let mut conn = self.0.get_conn().await.unwrap();
        conn.query_drop("BEGIN").await.unwrap();
        conn
    }

    async fn held_exec(conn: &mut Conn, sql: String) -> Result<(), String> {
        conn.query_drop(sql).await.map_err(|err| err.to_string())
    }

    async fn held_i64(conn: &mut Conn, sql: String) -> i64 {
        conn.query_first(sql).await.unwrap().expect("a row")
    }

    async fn commit(mut conn: Conn) -> Result<(), String> {
        Self::held_exec(&mut conn, "COMMIT".to_owned()).await
    }

    async fn script(
        pool: &mut Pool,
        policy: &RetryPolicy,
        script: Arc<Script>,
    ) -> Result<(), String> {
        txretry::mysql_async::transaction(&*pool, policy, async move |tx| script.run(tx).await)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_is_classified_and_retried() {
    let Some(url) = url("mysql_async::deadlock") else {
        return;
    };
    let pool = pool(&url);
    crate::locks::deadlock(MySqlBank(pool.clone())).await;
    pool.disconnect().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_wait_timeout_rolls_back_before_retrying() {
    let Some(url) = url("mysql_async::lock_wait_timeout") else {
        return;
    };
    let pool = pool(&url);
    crate::locks::lock_timeout(MySqlBank(pool.clone())).await;
    pool.disconnect().await.unwrap();
}
