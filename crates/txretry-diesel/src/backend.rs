//! What differs between the connections the runner drives: how a transaction begins with
//! the call's options, what to check before COMMIT, which codes to recover.
//!
//! Every statement here is one of a few fixed strings (core's `Isolation::as_sql`,
//! `SqliteBegin::as_sql`): nothing is built from user input.

use std::error::Error as StdError;

use diesel::connection::{AnsiTransactionManager, Connection};
use diesel::result::QueryResult;
use txretry_core::{Code, TxOptions};

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
use crate::codes::{Backends, extract_for};

/// A Diesel connection the runner can drive: [`PgConnection`](diesel::PgConnection)
/// (feature `postgres`), [`MysqlConnection`](diesel::MysqlConnection) (feature `mysql`)
/// and [`SqliteConnection`](diesel::SqliteConnection) (feature `sqlite`).
///
/// Sealed: the runner needs to know, per backend, how to begin a transaction with the
/// call's [`TxOptions`] and which codes Diesel dropped. Its methods are the runner in
/// Diesel's method style, `conn.retry_transaction(&policy, |conn| …)`; see
/// [`transaction`](crate::transaction) and [`transaction_with`](crate::transaction_with).
pub trait RetryConnection: Dialect {
    /// [`transaction`](crate::transaction) as a method of the connection.
    ///
    /// ```
    /// use diesel::connection::SimpleConnection;
    /// use diesel::prelude::*;
    /// use txretry::RetryPolicy;
    /// use txretry::diesel::RetryConnection;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut conn = SqliteConnection::establish(":memory:")?;
    /// conn.batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY)")?;
    /// let policy = RetryPolicy::default();
    /// let inserted = conn.retry_transaction(&policy, |conn| {
    ///     diesel::sql_query("INSERT INTO item (id) VALUES (1)").execute(conn)
    /// })?;
    /// assert_eq!(inserted, 1);
    /// # Ok(())
    /// # }
    /// ```
    fn retry_transaction<T, E, Via, F>(
        &mut self,
        policy: &txretry_core::RetryPolicy,
        f: F,
    ) -> Result<T, txretry_core::TxError<E>>
    where
        F: FnMut(&mut Self) -> Result<T, E>,
        E: From<diesel::result::Error> + txretry_core::AsError<Via>,
    {
        crate::transaction(self, policy, f)
    }

    /// [`transaction_with`](crate::transaction_with) as a method of the connection.
    fn retry_transaction_with<T, E, Via, F>(
        &mut self,
        policy: &txretry_core::RetryPolicy,
        options: &TxOptions,
        f: F,
    ) -> Result<T, txretry_core::TxError<E>>
    where
        F: FnMut(&mut Self) -> Result<T, E>,
        E: From<diesel::result::Error> + txretry_core::AsError<Via>,
    {
        crate::transaction_with(self, policy, options, f)
    }
}

impl<C: Dialect> RetryConnection for C {}

/// The per-backend part of the runner. Public only because [`RetryConnection`] names it;
/// it lives in a private module, so nobody outside this crate can implement it.
pub trait Dialect: Connection<TransactionManager = AnsiTransactionManager> + Sized {
    /// Begins a transaction with `options`, through Diesel's transaction manager (so that
    /// Diesel counts it open); returns a statement to run once the transaction has ended,
    /// if the options changed a setting of the connection's.
    #[doc(hidden)]
    fn begin(conn: &mut Self, options: &TxOptions) -> QueryResult<Option<&'static str>>;

    /// Checks, after the closure returned `Ok`, that the transaction can still commit.
    #[doc(hidden)]
    fn before_commit(_conn: &mut Self) -> QueryResult<()> {
        Ok(())
    }

    /// The code extractor for this backend's errors (the runner knows its backend; the
    /// registered `extract` has to try every backend compiled in).
    #[doc(hidden)]
    fn extract(error: &(dyn StdError + 'static)) -> Option<Code>;
}

#[cfg(feature = "postgres")]
impl Dialect for diesel::PgConnection {
    /// `BEGIN [ISOLATION LEVEL …] [READ ONLY]`, as `build_transaction()` would send it.
    /// Read-write is never spelled out, so the server's `default_transaction_read_only`
    /// keeps working.
    fn begin(conn: &mut Self, options: &TxOptions) -> QueryResult<Option<&'static str>> {
        AnsiTransactionManager::begin_transaction_sql(conn, &options.postgres_begin())?;
        Ok(None)
    }

    /// Postgres answers the COMMIT of an aborted transaction (the closure swallowed an
    /// error) by rolling back, with no error: Diesel would report it committed. In an
    /// aborted transaction this `SELECT 1` fails with 25P02 instead.
    fn before_commit(conn: &mut Self) -> QueryResult<()> {
        diesel::connection::SimpleConnection::batch_execute(conn, POSTGRES_ABORT_CHECK)
    }

    fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
        extract_for(error, Backends::NONE)
    }
}

#[cfg(feature = "mysql")]
impl Dialect for diesel::MysqlConnection {
    /// `[SET TRANSACTION ISOLATION LEVEL …;] START TRANSACTION [READ ONLY]` in one round
    /// trip: the level applies to the next transaction only, so it goes first.
    fn begin(conn: &mut Self, options: &TxOptions) -> QueryResult<Option<&'static str>> {
        AnsiTransactionManager::begin_transaction_sql(conn, &options.mysql_begin())?;
        Ok(None)
    }

    fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
        extract_for(
            error,
            Backends {
                mysql: true,
                ..Backends::NONE
            },
        )
    }
}

#[cfg(feature = "sqlite")]
impl Dialect for diesel::SqliteConnection {
    /// `BEGIN IMMEDIATE` by default, `DEFERRED` / `EXCLUSIVE` on request. Read-only:
    /// `PRAGMA query_only = ON` until the transaction ends (unless it already was), and
    /// `BEGIN DEFERRED`, since SQLite refuses the write lock of IMMEDIATE and EXCLUSIVE
    /// under `query_only`.
    fn begin(conn: &mut Self, options: &TxOptions) -> QueryResult<Option<&'static str>> {
        use diesel::connection::SimpleConnection;
        use diesel::prelude::RunQueryDsl;

        if !options.is_read_only() {
            AnsiTransactionManager::begin_transaction_sql(
                conn,
                options.get_sqlite_begin().as_sql(),
            )?;
            return Ok(None);
        }
        let already: bool = diesel::select(diesel::dsl::sql::<diesel::sql_types::Bool>(
            "(SELECT query_only FROM pragma_query_only())",
        ))
        .get_result(conn)?;
        if already {
            AnsiTransactionManager::begin_transaction_sql(conn, "BEGIN DEFERRED")?;
            return Ok(None);
        }
        conn.batch_execute("PRAGMA query_only = ON")?;
        if let Err(error) = AnsiTransactionManager::begin_transaction_sql(conn, "BEGIN DEFERRED") {
            // Nothing began: put the pragma back now. (Setting a flag pragma does not fail
            // short of running out of memory; the BEGIN's error is the one to report.)
            let _ = conn.batch_execute(QUERY_ONLY_OFF);
            return Err(error);
        }
        Ok(Some(QUERY_ONLY_OFF))
    }

    fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
        extract_for(
            error,
            Backends {
                sqlite: true,
                ..Backends::NONE
            },
        )
    }
}

/// Run on Postgres after the closure returned `Ok`, before COMMIT: it fails with 25P02 in
/// an aborted transaction, where COMMIT would roll back without an error.
#[cfg(any(feature = "postgres", feature = "async-postgres"))]
pub(crate) const POSTGRES_ABORT_CHECK: &str = "SELECT 1";

#[cfg(feature = "sqlite")]
const QUERY_ONLY_OFF: &str = "PRAGMA query_only = OFF";
