//! `ToolContext::once` on Postgres.

use std::sync::Arc;
use std::time::Duration;

use super::backend::sealed::Sealed;
use super::backend::{OnceBackend, Record, shared_methods};
use crate::Dialect;
use crate::once::record::age_seconds;
use crate::once::statements::{MIGRATE_LOCK, migrate_lock_name};

impl Sealed for sqlx::Postgres {}

impl OnceBackend for sqlx::Postgres {
    const DIALECT: Dialect = Dialect::Postgres;

    shared_methods!(sqlx::Postgres, sqlx::PgConnection);

    /// In a transaction that holds an advisory lock named after the table: concurrent
    /// `CREATE TABLE IF NOT EXISTS` of one table can fail on Postgres (a unique violation
    /// in its catalog), so creators take turns.
    async fn migrate<'c>(
        pool: &'c sqlx::PgPool,
        ddl: &'c Arc<str>,
        table: &'c str,
    ) -> Result<(), sqlx::Error> {
        let mut tx = pool.begin().await?;
        sqlx::query(MIGRATE_LOCK)
            .bind(migrate_lock_name(table))
            .execute(&mut *tx)
            .await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(Arc::clone(ddl)))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    async fn prune<'c>(
        pool: &'c sqlx::PgPool,
        sql: &'c Arc<str>,
        older_than: Duration,
    ) -> Result<u64, sqlx::Error> {
        let seconds = age_seconds(older_than);
        let done = sqlx::query(sqlx::AssertSqlSafe(Arc::clone(sql)))
            .bind(seconds)
            .execute(pool)
            .await?;
        Ok(done.rows_affected())
    }

    fn is_missing_table(error: &sqlx::Error) -> bool {
        // undefined_table
        error
            .as_database_error()
            .and_then(|e| e.code())
            .is_some_and(|code| code == "42P01")
    }
}
