//! [`Bank`](crate::transfers::Bank) for SeaORM, on any of its backends: one
//! `DatabaseConnection` (a pool), which every worker clones. `D` names the SQL dialect.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, Statement, Value};
use txretry::{RetryPolicy, TxOptions};

use crate::transfers::{Bank, Dialect, Sql, Transfer};

/// A dialect, as a type (a `Bank`'s dialect is a constant).
pub trait OfDialect: Send + Sync + 'static {
    const DIALECT: Dialect;
}

/// SeaORM for the transfers of `tests/shared/transfers.rs`.
pub struct SeaOrmBank<D>(pub DatabaseConnection, pub PhantomData<D>);

/// `sql` with its bind values, for the connection's backend.
fn statement(db: &impl ConnectionTrait, sql: &str, values: &[i64]) -> Statement {
    let values = values.iter().map(|&v| Value::from(v));
    Statement::from_sql_and_values(db.get_database_backend(), sql, values)
}

/// The one integer `sql` selects.
pub async fn one(db: &impl ConnectionTrait, sql: &str, values: &[i64]) -> Result<i64, DbErr> {
    let row = db.query_one_raw(statement(db, sql, values)).await?;
    row.expect("a row").try_get_by_index(0)
}

impl<D: OfDialect> Bank for SeaOrmBank<D> {
    const DIALECT: Dialect = D::DIALECT;
    type Worker = DatabaseConnection;

    async fn worker(&self) -> DatabaseConnection {
        self.0.clone()
    }

    async fn exec(&self, sql: String) {
        self.0.execute_unprepared(&sql).await.unwrap();
    }

    async fn query_i64(&self, sql: String) -> i64 {
        one(&self.0, &sql, &[]).await.unwrap()
    }

    async fn transfer(
        db: &mut DatabaseConnection,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: Arc<Sql>,
        t: Transfer,
        runs: Arc<AtomicU32>,
    ) -> Result<(), String> {
        txretry::sea_orm::transaction_with(db, policy, options, async move |txn| {
            runs.fetch_add(1, Ordering::Relaxed);
            if let Some(prelude) = sql.prelude {
                txn.execute_unprepared(prelude).await?;
            }
            let balance = one(txn, &sql.balance, &[t.src]).await?;
            let debit = statement(txn, &sql.debit, &[balance - t.amount, t.src]);
            txn.execute_raw(debit).await?;
            txn.execute_raw(statement(txn, &sql.credit, &[t.amount, t.dst]))
                .await?;
            let row = [t.task, t.seq, t.src, t.dst, t.amount];
            txn.execute_raw(statement(txn, &sql.record, &row)).await?;
            Ok::<_, DbErr>(())
        })
        .await
        .map_err(|err| err.to_string())
    }

    async fn read(
        db: &mut DatabaseConnection,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: String,
    ) -> Result<i64, String> {
        txretry::sea_orm::transaction_with(db, policy, options, async move |txn| {
            one(txn, &sql, &[]).await
        })
        .await
        .map_err(|err| err.to_string())
    }
}
