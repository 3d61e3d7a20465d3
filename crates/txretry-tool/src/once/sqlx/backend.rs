//! The sqlx databases `ToolContext::once` records calls in, and what each must do.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use sqlx::Pool;

use crate::Dialect;

/// A record as it is read back: `status, output, error_kind, error_message`.
pub(super) type Record = (String, Option<String>, Option<String>, Option<String>);

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A sqlx database `ToolContext::once` can record calls in: [`Postgres`](sqlx::Postgres)
/// (feature `sqlx-postgres`), [`MySql`](sqlx::MySql) (feature `sqlx-mysql`, MySQL 8 and
/// MariaDB) and `Sqlite` (feature `sqlx-sqlite`). Sealed; its items are internal.
pub trait OnceBackend: txretry_sqlx::Backend + sealed::Sealed {
    /// The SQL dialect of the records' statements.
    #[doc(hidden)]
    const DIALECT: Dialect;

    /// Runs one of the records' statements with string binds; the rows it affected.
    #[doc(hidden)]
    fn execute<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c Arc<str>,
        binds: &'c [&'c str],
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'c;

    /// Reads a record (`status, output, error_kind, error_message`), if there is one.
    #[doc(hidden)]
    fn fetch_record<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c Arc<str>,
        binds: &'c [&'c str],
    ) -> impl Future<Output = Result<Option<Record>, sqlx::Error>> + Send + 'c;

    /// Runs a fixed statement (a savepoint).
    #[doc(hidden)]
    fn fixed<'c>(
        conn: &'c mut Self::Connection,
        sql: &'static str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'c;

    /// Creates the table and its index if they do not exist.
    #[doc(hidden)]
    fn migrate<'c>(
        pool: &'c Pool<Self>,
        ddl: &'c Arc<str>,
        table: &'c str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'c;

    /// Deletes the records created more than `older_than` ago; how many.
    #[doc(hidden)]
    fn prune<'c>(
        pool: &'c Pool<Self>,
        sql: &'c Arc<str>,
        older_than: Duration,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'c;

    /// Whether `error` says the table does not exist.
    #[doc(hidden)]
    fn is_missing_table(error: &sqlx::Error) -> bool;
}

/// `execute`, `fetch_record` and `fixed`: the same code for every database.
macro_rules! shared_methods {
    ($db:ty, $conn:ty) => {
        async fn execute<'c>(
            conn: &'c mut $conn,
            sql: &'c Arc<str>,
            binds: &'c [&'c str],
        ) -> Result<u64, sqlx::Error> {
            let mut query = sqlx::query::<$db>(sqlx::AssertSqlSafe(Arc::clone(sql)));
            for bind in binds {
                query = query.bind(*bind);
            }
            Ok(query.execute(conn).await?.rows_affected())
        }

        async fn fetch_record<'c>(
            conn: &'c mut $conn,
            sql: &'c Arc<str>,
            binds: &'c [&'c str],
        ) -> Result<Option<Record>, sqlx::Error> {
            let mut query = sqlx::query_as::<$db, Record>(sqlx::AssertSqlSafe(Arc::clone(sql)));
            for bind in binds {
                query = query.bind(*bind);
            }
            query.fetch_optional(conn).await
        }

        async fn fixed(conn: &mut $conn, sql: &'static str) -> Result<(), sqlx::Error> {
            sqlx::raw_sql(sql).execute(conn).await.map(drop)
        }
    };
}

pub(super) use shared_methods;
