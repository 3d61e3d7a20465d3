//! The transfers of `tests/shared/transfers.rs` under SERIALIZABLE, each worker on a client
//! of its own: serialization failures and deadlocks, each retried; every transfer commits
//! exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio_postgres::Client;
use txretry::{RetryPolicy, TxOptions};

use crate::common::{connect, url};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_accounts_under_serializable() {
    let Some(url) = url("tokio_postgres::contention") else {
        return;
    };
    let run = Run::postgres_serializable("tokio-postgres, SERIALIZABLE");
    transfers(PgBank(url), run).await;
}
