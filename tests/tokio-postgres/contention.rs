//! The scenarios of `tests/shared/`, each worker on a client of its own: the transfers
//! under SERIALIZABLE (serialization failures and deadlocks, each retried; every transfer
//! commits exactly once), and the deadlock and the lock timeout of `locks.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio_postgres::Client;
use txretry::{RetryPolicy, TxOptions};

use crate::common::{connect, url};
use crate::locks::{Failure, Script, Sessions, Tx};
use crate::transfers::{Bank, Dialect, Run, Sql, Transfer, transfers};

/// tokio-postgres for the transfers: the server's URL; each worker connects.
struct PgBank(String);

impl Bank for PgBank {
    const DIALECT: Dialect = Dialect::Postgres;
    type Worker = Client;

    async fn worker(&self) -> Client {
        connect(&self.0).await
    }

    async fn exec(&self, sql: String) {
        connect(&self.0).await.batch_execute(&sql).await.unwrap();
    }

    async fn query_i64(&self, sql: String) -> i64 {
        connect(&self.0)
            .await
            .query_one(&sql, &[])
            .await
            .unwrap()
            .get(0)
    }

    async fn transfer(
        client: &mut Client,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: Arc<Sql>,
        t: Transfer,
        runs: Arc<AtomicU32>,
    ) -> Result<(), String> {
        txretry::tokio_postgres::transaction_with(client, policy, options, async move |tx| {
            runs.fetch_add(1, Ordering::Relaxed);
            if let Some(prelude) = sql.prelude {
                tx.batch_execute(prelude).await?;
            }
            let balance: i64 = tx.query_one(&sql.balance, &[&t.src]).await?.get(0);
            tx.execute(&sql.debit, &[&(balance - t.amount), &t.src])
                .await?;
            tx.execute(&sql.credit, &[&t.amount, &t.dst]).await?;
            let row = [&t.task, &t.seq, &t.src, &t.dst, &t.amount];
            tx.execute(&sql.record, &row.map(|v| v as _)).await?;
            Ok::<_, tokio_postgres::Error>(())
        })
        .await
        .map_err(|err| err.to_string())
    }

    async fn read(
        client: &mut Client,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: String,
    ) -> Result<i64, String> {
        txretry::tokio_postgres::transaction_with(client, policy, options, async move |tx| {
            Ok::<_, tokio_postgres::Error>(tx.query_one(&sql, &[]).await?.get(0))
        })
        .await
        .map_err(|err| err.to_string())
    }
}

impl Tx for tokio_postgres::Transaction<'_> {
    type Error = tokio_postgres::Error;

    async fn exec(&mut self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.batch_execute(sql).await
    }

    async fn one(&mut self, sql: &str) -> Result<i64, tokio_postgres::Error> {
        Ok(self.query_one(sql, &[]).await?.get(0))
    }

    fn failure(err: &tokio_postgres::Error, in_tx: Option<i64>) -> Failure {
        let db = err.as_db_error();
        Failure {
            sqlstate: db.map(|db| db.code().code().to_owned()),
            errno: None,
            message: db.map_or_else(|| err.to_string(), |db| db.message().to_owned()),
            classified: txretry::classify(err),
            in_tx,
        }
    }
}

impl Sessions for PgBank {
    const KEEPS_ERRNO: bool = false;
    type Held = Client;

    async fn begin(&self) -> Client {
        let client = connect(&self.0).await;
        client.batch_execute("BEGIN").await.unwrap();
        client
    }

    async fn held_exec(client: &mut Client, sql: String) -> Result<(), String> {
        client
            .batch_execute(&sql)
            .await
            .map_err(|err| err.to_string())
    }

    async fn held_i64(client: &mut Client, sql: String) -> i64 {
        client.query_one(&sql, &[]).await.unwrap().get(0)
    }

    async fn commit(client: Client) -> Result<(), String> {
        client
            .batch_execute("COMMIT")
            .await
            .map_err(|err| err.to_string())
    }

    async fn script(
        client: &mut Client,
        policy: &RetryPolicy,
        script: Arc<Script>,
    ) -> Result<(), String> {
        txretry::tokio_postgres::transaction(client, policy, async move |tx| script.run(tx).await)
            .await
            .map_err(|err| err.to_string())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_accounts_under_serializable() {
    let Some(url) = url("tokio_postgres::contention") else {
        return;
    };
    let run = Run::postgres_serializable("tokio-postgres, SERIALIZABLE");
    transfers(PgBank(url), run).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_is_classified_and_retried() {
    let Some(url) = url("tokio_postgres::deadlock") else {
        return;
    };
    crate::locks::deadlock(PgBank(url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_timeout_is_classified_and_retried() {
    let Some(url) = url("tokio_postgres::lock_timeout") else {
        return;
    };
    crate::locks::lock_timeout(PgBank(url)).await;
}
