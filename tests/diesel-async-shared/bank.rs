//! [`Bank`](crate::transfers::Bank) and [`Sessions`](crate::locks::Sessions) for
//! diesel-async, written once for both binaries (each `server` module names its connection
//! type `Conn`, its server's URL and `DIALECT`): each worker (and each session outside the
//! runner) connects on its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use diesel::QueryableByName;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::sql_types::BigInt;
use diesel_async::{AsyncConnection, AsyncConnectionCore, RunQueryDsl, SimpleAsyncConnection};
use txretry::{RetryPolicy, TxOptions};

use crate::failure::failure;
use crate::locks::{Failure, Script, Sessions, Tx};
use crate::server::{Conn, DIALECT};
use crate::transfers::{Bank, Dialect, Sql, Transfer};

/// diesel-async for the transfers of `tests/shared/transfers.rs`: the server's URL.
pub struct DieselAsyncBank(pub String);

/// A row of one `bigint` column named `v`.
#[derive(QueryableByName)]
struct V {
    #[diesel(sql_type = BigInt)]
    v: i64,
}

type Backend = <Conn as AsyncConnectionCore>::Backend;

/// `sql` with `binds`, all `bigint`.
fn query(sql: &str, binds: &[i64]) -> BoxedSqlQuery<'static, Backend, SqlQuery> {
    let mut query = diesel::sql_query(sql.to_owned()).into_boxed();
    for &bind in binds {
        query = query.bind::<BigInt, _>(bind);
    }
    query
}

/// The one integer `sql` selects (as `v`).
async fn one(conn: &mut Conn, sql: &str, binds: &[i64]) -> diesel::QueryResult<i64> {
    let row: V = query(sql, binds).get_result(conn).await?;
    Ok(row.v)
}

impl Bank for DieselAsyncBank {
    const DIALECT: Dialect = DIALECT;
    type Worker = Conn;

    async fn worker(&self) -> Conn {
        Conn::establish(&self.0).await.unwrap()
    }

    async fn exec(&self, sql: String) {
        let mut conn = self.worker().await;
        conn.batch_execute(&sql).await.unwrap();
    }

    async fn query_i64(&self, sql: String) -> i64 {
        one(&mut self.worker().await, &sql, &[]).await.unwrap()
    }

    async fn transfer(
        conn: &mut Conn,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: Arc<Sql>,
        t: Transfer,
        runs: Arc<AtomicU32>,
    ) -> Result<(), String> {
        txretry::diesel::async_transaction_with(conn, policy, options, async move |conn| {
            runs.fetch_add(1, Ordering::Relaxed);
            if let Some(prelude) = sql.prelude {
                conn.batch_execute(prelude).await?;
            }
            let balance = one(conn, &sql.balance, &[t.src]).await?;
            let debit = query(&sql.debit, &[balance - t.amount, t.src]);
            debit.execute(conn).await?;
            query(&sql.credit, &[t.amount, t.dst]).execute(conn).await?;
            let row = [t.task, t.seq, t.src, t.dst, t.amount];
            query(&sql.record, &row).execute(conn).await?;
            Ok::<_, diesel::result::Error>(())
        })
        .await
        .map_err(|err| err.to_string())
    }

    async fn read(
        conn: &mut Conn,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: String,
    ) -> Result<i64, String> {
        txretry::diesel::async_transaction_with(conn, policy, options, async move |conn| {
            one(conn, &sql, &[]).await
        })
        .await
        .map_err(|err| err.to_string())
    }
}

impl Tx for Conn {
    type Error = diesel::result::Error;

    async fn exec(&mut self, sql: &str) -> diesel::QueryResult<()> {
        diesel::sql_query(sql).execute(self).await.map(drop)
    }

    async fn one(&mut self, sql: &str) -> diesel::QueryResult<i64> {
        one(self, sql, &[]).await
    }

    fn failure(err: &diesel::result::Error, in_tx: Option<i64>) -> Failure {
        failure(err, in_tx)
    }
}

impl Sessions for DieselAsyncBank {
    const KEEPS_ERRNO: bool = false;
    type Held = Conn;

    async fn begin(&self) -> Conn {
        let mut held = self.worker().await;
        held.batch_execute("BEGIN").await.unwrap();
        held
    }

    async fn held_exec(held: &mut Conn, sql: String) -> Result<(), String> {
        held.batch_execute(&sql)
            .await
            .map_err(|err| err.to_string())
    }

    async fn held_i64(held: &mut Conn, sql: String) -> i64 {
        one(held, &sql, &[]).await.unwrap()
    }

    async fn commit(mut held: Conn) -> Result<(), String> {
        Self::held_exec(&mut held, "COMMIT".to_owned()).await
    }

    async fn script(
        conn: &mut Conn,
        policy: &RetryPolicy,
        script: Arc<Script>,
    ) -> Result<(), String> {
        txretry::diesel::async_transaction(conn, policy, async move |conn| script.run(conn).await)
            .await
            .map_err(|err| err.to_string())
    }
}
