//! `ToolContext::once` on SQLite.

use std::sync::Arc;
use std::time::Duration;

use super::backend::sealed::Sealed;
use super::backend::{OnceBackend, Record, shared_methods};
use crate::Dialect;
use crate::once::record::age_modifier;

impl Sealed for sqlx_sqlite::Sqlite {}

impl OnceBackend for sqlx_sqlite::Sqlite {
    const DIALECT: Dialect = Dialect::Sqlite;

    shared_methods!(sqlx_sqlite::Sqlite, sqlx_sqlite::SqliteConnection);

    /// `CREATE TABLE IF NOT EXISTS` and `CREATE INDEX IF NOT EXISTS`, in one transaction.
    async fn migrate<'c>(
        pool: &'c sqlx::Pool<sqlx_sqlite::Sqlite>,
        ddl: &'c Arc<str>,
        _: &'c str,
    ) -> Result<(), sqlx::Error> {
        let mut tx = pool.begin().await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(Arc::clone(ddl)))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }

    async fn prune<'c>(
        pool: &'c sqlx::Pool<sqlx_sqlite::Sqlite>,
        sql: &'c Arc<str>,
        older_than: Duration,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(sqlx::AssertSqlSafe(Arc::clone(sql)))
            .bind(age_modifier(older_than))
            .execute(pool)
            .await?;
        Ok(done.rows_affected())
    }

    fn is_missing_table(error: &sqlx::Error) -> bool {
        error
            .as_database_error()
            .is_some_and(|e| e.message().starts_with("no such table"))
    }
}
