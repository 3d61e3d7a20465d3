//! What the engine needs of each database: its placeholder style, how it binds a value and
//! how it reads a row into JSON. One implementation per database, in its own file.

use std::future::Future;
use std::sync::Arc;

use serde_json::{Map, Value};
use sqlx::{Pool, Transaction};

use super::stopper::Stopper;
use crate::config::SqlValue;

/// What one statement did.
#[derive(Debug, Default)]
pub struct Done {
    /// Whether the statement returns rows (a SELECT, a RETURNING), even none.
    pub returns_rows: bool,
    /// The rows it returned, as objects keyed by column name, in column order: at most
    /// one more than the limit it ran under (the rest were not read).
    pub rows: Vec<Map<String, Value>>,
    /// The rows it returned (as read), or else the rows it affected.
    pub count: u64,
}

/// A database the server runs tools on.
pub trait Database: txretry_sqlx::Backend + txretry_tool::OnceBackend {
    /// Runs `sql` with `binds` in the transaction, reading at most `limit + 1` of the rows
    /// it returns.
    fn run(
        tx: &mut Transaction<'_, Self>,
        sql: Arc<str>,
        binds: Vec<SqlValue>,
        limit: u32,
    ) -> impl Future<Output = Result<Done, sqlx::Error>> + Send;

    /// What stops the transaction's statement in the server if the call is dropped while
    /// it runs; `None` where nothing can (the default).
    fn stopper(
        tx: &mut Transaction<'_, Self>,
        pool: &Pool<Self>,
    ) -> impl Future<Output = Result<Option<Stopper>, sqlx::Error>> + Send {
        let _ = (tx, pool);
        async { Ok(None) }
    }
}

/// A column this server cannot read as JSON: the error names it and says how to cast it.
pub fn unreadable(column: &str, type_name: &str, cast: &str) -> sqlx::Error {
    sqlx::Error::Decode(unreadable_text(column, type_name, cast).into())
}

/// [`unreadable`]'s message.
pub fn unreadable_text(column: &str, type_name: &str, cast: &str) -> String {
    format!(
        "column {column:?} has type {type_name}, which txretry-mcp does not turn into JSON: cast it in the SQL ({cast})"
    )
}

/// Binds each value to the query with the Rust type that carries it.
macro_rules! bind_all {
    ($query:expr, $binds:expr) => {{
        let mut query = $query;
        for value in $binds {
            query = match value {
                SqlValue::Null(kind) => match kind {
                    Some(ParamKind::String) | None => query.bind(None::<String>),
                    Some(ParamKind::Integer) => query.bind(None::<i64>),
                    Some(ParamKind::Number) => query.bind(None::<f64>),
                    Some(ParamKind::Boolean) => query.bind(None::<bool>),
                },
                SqlValue::Text(text) => query.bind(text),
                SqlValue::Integer(n) => query.bind(n),
                SqlValue::Number(n) => query.bind(n),
                SqlValue::Boolean(b) => query.bind(b),
            };
        }
        query
    }};
}
pub(crate) use bind_all;

/// Runs a statement: prepared first (cached per connection, with the parameter types
/// `$types`, which may be none) to learn whether it returns rows, then fetched (at most
/// `$limit + 1` rows read) or executed.
macro_rules! run_statement {
    ($db:ty, $tx:expr, $sql:expr, $types:expr, $binds:expr, $limit:expr, $read_row:path) => {{
        use futures_util::TryStreamExt as _;
        use sqlx::{Executor, SqlSafeStr, Statement as _};
        let conn = &mut **$tx;
        // The SQL is the config file's (placeholders renumbered); a call's values are bound.
        let sql = sqlx::AssertSqlSafe($sql).into_sql_str();
        let prepared = conn.prepare_with(sql.clone(), $types).await?;
        let returns_rows = !prepared.columns().is_empty();
        let query = $crate::engine::database::bind_all!(sqlx::query::<$db>(sql), $binds);
        if returns_rows {
            // One past the limit says it was passed; the rest is never read into memory.
            let mut rows = Vec::new();
            let mut fetched = query.fetch(&mut *conn);
            while let Some(row) = fetched.try_next().await? {
                rows.push($read_row(&row)?);
                if rows.len() > $limit as usize {
                    break;
                }
            }
            drop(fetched);
            Ok(Done {
                returns_rows,
                count: rows.len() as u64,
                rows,
            })
        } else {
            let result = query.execute(&mut *conn).await?;
            Ok(Done {
                returns_rows,
                rows: Vec::new(),
                count: result.rows_affected(),
            })
        }
    }};
}
pub(crate) use run_statement;

/// Implements [`Database`] for a sqlx database that takes each value as it is bound (MySQL
/// sends its type with every execution; SQLite's values carry their own), given how it
/// reads a row and, where the server can stop a statement, how a [`Stopper`] is armed.
macro_rules! database {
    ($db:ty, $read_row:path $(, stopper = $stopper:path)?) => {
        impl $crate::engine::database::Database for $db {
            async fn run(
                tx: &mut sqlx::Transaction<'_, $db>,
                sql: std::sync::Arc<str>,
                binds: Vec<$crate::config::SqlValue>,
                limit: u32,
            ) -> Result<$crate::engine::database::Done, sqlx::Error> {
                use $crate::config::{ParamKind, SqlValue};
                use $crate::engine::database::Done;
                $crate::engine::database::run_statement!($db, tx, sql, &[], binds, limit, $read_row)
            }

            $(
                async fn stopper(
                    tx: &mut sqlx::Transaction<'_, $db>,
                    pool: &sqlx::Pool<$db>,
                ) -> Result<Option<$crate::engine::stopper::Stopper>, sqlx::Error> {
                    $stopper(tx, pool).await.map(Some)
                }
            )?
        }
    };
}
pub(crate) use database;
