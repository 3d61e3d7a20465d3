//! [`Sessions`](crate::locks::Sessions) for SeaORM's [`SeaOrmBank`], on Postgres and
//! MySQL (each binary's `dialect` module reads a MySQL error's number): a
//! `DatabaseTransaction` holds a session of the pool outside the runner.

use std::sync::Arc;

use sea_orm::{ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbErr, TransactionTrait};
use txretry::RetryPolicy;

use crate::bank::{OfDialect, SeaOrmBank, one};
use crate::locks::{Failure, Script, Sessions, Tx};

/// SeaORM's runner lends its closure a shared reference.
impl Tx for &DatabaseTransaction {
    type Error = DbErr;

    async fn exec(&mut self, sql: &str) -> Result<(), DbErr> {
        self.execute_unprepared(sql).await.map(drop)
    }

    async fn one(&mut self, sql: &str) -> Result<i64, DbErr> {
        one(*self, sql, &[]).await
    }

    /// sqlx's error inside SeaORM's.
    fn failure(err: &DbErr, in_tx: Option<i64>) -> Failure {
        let db = txretry::sea_orm::sqlx_error(err).and_then(|sqlx| sqlx.as_database_error());
        Failure {
            sqlstate: db.and_then(|db| db.code()).map(|code| code.into_owned()),
            errno: crate::dialect::errno(err),
            message: db.map_or_else(|| err.to_string(), |db| db.message().to_owned()),
            classified: txretry::classify(err),
            in_tx,
        }
    }
}

impl<D: OfDialect> Sessions for SeaOrmBank<D> {
    const KEEPS_ERRNO: bool = true;
    type Held = DatabaseTransaction;

    async fn begin(&self) -> DatabaseTransaction {
        self.0.begin().await.unwrap()
    }

    async fn held_exec(held: &mut DatabaseTransaction, sql: String) -> Result<(), String> {
        let done = held.execute_unprepared(&sql).await;
        done.map(drop).map_err(|err| err.to_string())
    }

    async fn held_i64(held: &mut DatabaseTransaction, sql: String) -> i64 {
        one(held, &sql, &[]).await.unwrap()
    }

    async fn commit(held: DatabaseTransaction) -> Result<(), String> {
        held.commit().await.map_err(|err| err.to_string())
    }

    async fn script(
        db: &mut DatabaseConnection,
        policy: &RetryPolicy,
        script: Arc<Script>,
    ) -> Result<(), String> {
        txretry::sea_orm::transaction(&*db, policy, async move |mut txn| {
            script.run(&mut txn).await
        })
        .await
        .map_err(|err| err.to_string())
    }
}
