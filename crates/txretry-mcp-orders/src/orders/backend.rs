//! What the orders tools need from a database, for SQLite, Postgres and MySQL/MariaDB
//! alike: run a prepared statement with its binds, read rows back. The implementation is one
//! text for the three (the `backend!` macro); the tools are generic over [`Backend`], so each
//! handler is written once.

use std::future::Future;

use sqlx::SqlStr;

use super::dialect::Dialect;

/// A value bound to a statement's placeholder.
#[derive(Clone, Copy, Debug)]
pub enum Bind<'a> {
    /// An integer (ids, cents).
    Int(i64),
    /// A string (call ids, tool names).
    Text(&'a str),
}

mod sealed {
    pub trait Sealed {}
}

/// A database the orders tools run on: txretry-sqlx's runner can run its transactions, and
/// it can run the tools' statements. Sealed: SQLite, Postgres, MySQL/MariaDB.
pub trait Backend: txretry_sqlx::Backend + sealed::Sealed {
    /// Which statements it gets.
    const DIALECT: Dialect;

    /// Runs `sql` with `binds`; the rows it affected.
    fn execute<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c SqlStr,
        binds: &'c [Bind<'c>],
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'c;

    /// Runs `sql` with `binds`; its first row as `(integer, string, integer)`, if any.
    fn fetch_order<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c SqlStr,
        binds: &'c [Bind<'c>],
    ) -> impl Future<Output = Result<Option<(i64, String, i64)>, sqlx::Error>> + Send + 'c;

    /// Runs `sql` with `binds`; the integer in its first row, if any.
    fn fetch_int<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c SqlStr,
        binds: &'c [Bind<'c>],
    ) -> impl Future<Output = Result<Option<i64>, sqlx::Error>> + Send + 'c;

    /// Runs `sql` with `binds`; the integer of each row.
    fn fetch_ints<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c SqlStr,
        binds: &'c [Bind<'c>],
    ) -> impl Future<Output = Result<Vec<i64>, sqlx::Error>> + Send + 'c;

    /// Runs a script of several statements (the schema).
    fn script<'c>(
        conn: &'c mut Self::Connection,
        sql: &'c SqlStr,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'c;
}

/// `query` with `binds` bound to its placeholders, in order.
macro_rules! bound {
    ($query:expr, $binds:expr) => {{
        let mut query = $query;
        for bind in $binds {
            query = match *bind {
                Bind::Int(value) => query.bind(value),
                Bind::Text(value) => query.bind(value),
            };
        }
        query
    }};
}

/// The same code for every database; only the types differ.
macro_rules! backend {
    ($db:ty, $dialect:expr) => {
        impl sealed::Sealed for $db {}

        impl Backend for $db {
            const DIALECT: Dialect = $dialect;

            async fn execute<'c>(
                conn: &'c mut <$db as sqlx::Database>::Connection,
                sql: &'c SqlStr,
                binds: &'c [Bind<'c>],
            ) -> Result<u64, sqlx::Error> {
                let query = bound!(sqlx::query::<$db>(sql.clone()), binds);
                Ok(query.execute(conn).await?.rows_affected())
            }

            async fn fetch_order<'c>(
                conn: &'c mut <$db as sqlx::Database>::Connection,
                sql: &'c SqlStr,
                binds: &'c [Bind<'c>],
            ) -> Result<Option<(i64, String, i64)>, sqlx::Error> {
                let query = bound!(
                    sqlx::query_as::<$db, (i64, String, i64)>(sql.clone()),
                    binds
                );
                query.fetch_optional(conn).await
            }

            async fn fetch_int<'c>(
                conn: &'c mut <$db as sqlx::Database>::Connection,
                sql: &'c SqlStr,
                binds: &'c [Bind<'c>],
            ) -> Result<Option<i64>, sqlx::Error> {
                let query = bound!(sqlx::query_scalar::<$db, i64>(sql.clone()), binds);
                query.fetch_optional(conn).await
            }

            async fn fetch_ints<'c>(
                conn: &'c mut <$db as sqlx::Database>::Connection,
                sql: &'c SqlStr,
                binds: &'c [Bind<'c>],
            ) -> Result<Vec<i64>, sqlx::Error> {
                let query = bound!(sqlx::query_scalar::<$db, i64>(sql.clone()), binds);
                query.fetch_all(conn).await
            }

            async fn script<'c>(
                conn: &'c mut <$db as sqlx::Database>::Connection,
                sql: &'c SqlStr,
            ) -> Result<(), sqlx::Error> {
                sqlx::raw_sql(sql.clone()).execute(conn).await.map(drop)
            }
        }
    };
}

backend!(sqlx::Sqlite, Dialect::Sqlite);
backend!(sqlx::Postgres, Dialect::Postgres);
backend!(sqlx::MySql, Dialect::MySql);
