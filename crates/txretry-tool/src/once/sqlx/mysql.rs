//! `ToolContext::once` on MySQL and MariaDB.

use std::sync::Arc;
use std::time::Duration;

use super::backend::sealed::Sealed;
use super::backend::{OnceBackend, Record, shared_methods};
use crate::Dialect;
use crate::once::record::age_micros;

impl Sealed for sqlx::MySql {}

impl OnceBackend for sqlx::MySql {
    const DIALECT: Dialect = Dialect::MySql;

    shared_methods!(sqlx::MySql, sqlx::MySqlConnection);

    /// One `CREATE TABLE IF NOT EXISTS` (the index is part of it).
    async fn migrate<'c>(
        pool: &'c sqlx::MySqlPool,
        ddl: &'c Arc<str>,
        _: &'c str,
    ) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(Arc::clone(ddl)))
            .execute(pool)
            .await
            .map(drop)
    }

    async fn prune<'c>(
        pool: &'c sqlx::MySqlPool,
        sql: &'c Arc<str>,
        older_than: Duration,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(sqlx::AssertSqlSafe(Arc::clone(sql)))
            .bind(age_micros(older_than))
            .execute(pool)
            .await?;
        Ok(done.rows_affected())
    }

    fn is_missing_table(error: &sqlx::Error) -> bool {
        // ER_NO_SUCH_TABLE
        error
            .as_database_error()
            .and_then(|e| e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
            .is_some_and(|e| e.number() == 1146)
    }
}
