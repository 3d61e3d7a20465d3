//! What differs between the diesel-async connections the async runner drives: how a
//! transaction begins with the call's options, what to check before COMMIT, which codes
//! to recover.
//!
//! Every statement here is built by core's `TxOptions::postgres_begin` /
//! `TxOptions::mysql_begin` from fixed strings: nothing comes from user input.

use std::error::Error as StdError;
use std::future::Future;

use diesel::result::Error;
use diesel_async::{AnsiTransactionManager, AsyncConnection};
use txretry_core::{AsError, Code, RetryPolicy, TxError, TxOptions};

use crate::codes::{Backends, extract_for};

/// A diesel-async connection the async runner can drive: `AsyncPgConnection` (feature
/// `async-postgres`) and `AsyncMysqlConnection` (feature `async-mysql`).
///
/// Sealed: the runner needs to know, per backend, how to begin a transaction with the
/// call's [`TxOptions`] and which codes diesel-async dropped. Its methods are the runner in
/// diesel-async's method style, `conn.retry_transaction(&policy, async |conn| …).await`;
/// see [`async_transaction`](crate::async_transaction) and
/// [`async_transaction_with`](crate::async_transaction_with).
pub trait AsyncRetryConnection: AsyncDialect {
    /// [`async_transaction`](crate::async_transaction) as a method of the connection.
    ///
    #[cfg_attr(feature = "async-postgres", doc = "```no_run")]
    #[cfg_attr(not(feature = "async-postgres"), doc = "```ignore")]
    /// use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    /// use txretry::RetryPolicy;
    /// use txretry::diesel::AsyncRetryConnection;
    ///
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let mut conn = AsyncPgConnection::establish("postgres://postgres@127.0.0.1/test").await?;
    /// let policy = RetryPolicy::default();
    /// let inserted = conn
    ///     .retry_transaction(&policy, async |conn| {
    ///         diesel::sql_query("INSERT INTO item (id) VALUES (1)").execute(conn).await
    ///     })
    ///     .await?;
    /// assert_eq!(inserted, 1);
    /// # Ok(())
    /// # }
    /// ```
    fn retry_transaction<T, E, Via, F>(
        &mut self,
        policy: &RetryPolicy,
        f: F,
    ) -> impl Future<Output = Result<T, TxError<E>>>
    where
        F: AsyncFnMut(&mut Self) -> Result<T, E>,
        E: From<Error> + AsError<Via>,
    {
        crate::async_transaction(self, policy, f)
    }

    /// [`async_transaction_with`](crate::async_transaction_with) as a method of the
    /// connection.
    fn retry_transaction_with<T, E, Via, F>(
        &mut self,
        policy: &RetryPolicy,
        options: &TxOptions,
        f: F,
    ) -> impl Future<Output = Result<T, TxError<E>>>
    where
        F: AsyncFnMut(&mut Self) -> Result<T, E>,
        E: From<Error> + AsError<Via>,
    {
        crate::async_transaction_with(self, policy, options, f)
    }
}

impl<C: AsyncDialect> AsyncRetryConnection for C {}

/// The per-backend part of the async runner. Public only because [`AsyncRetryConnection`]
/// names it; it lives in a private module, so nobody outside this crate can implement it.
pub trait AsyncDialect: AsyncConnection<TransactionManager = AnsiTransactionManager> {
    /// The statement that begins a transaction with `options`, sent through diesel-async's
    /// transaction manager (so that it counts the transaction open).
    #[doc(hidden)]
    fn begin_sql(options: &TxOptions) -> String;

    /// A statement to run after the closure returned `Ok`, before COMMIT, that fails when
    /// the transaction can no longer commit.
    #[doc(hidden)]
    const BEFORE_COMMIT: Option<&'static str> = None;

    /// The code extractor for this backend's errors.
    #[doc(hidden)]
    fn extract(error: &(dyn StdError + 'static)) -> Option<Code>;
}

#[cfg(feature = "async-postgres")]
impl AsyncDialect for diesel_async::AsyncPgConnection {
    /// `BEGIN [ISOLATION LEVEL …] [READ ONLY]`, as `build_transaction()` would send it.
    fn begin_sql(options: &TxOptions) -> String {
        options.postgres_begin()
    }

    /// Postgres answers the COMMIT of an aborted transaction by rolling back, with no
    /// error; this `SELECT 1` fails with 25P02 instead.
    const BEFORE_COMMIT: Option<&'static str> = Some(crate::backend::POSTGRES_ABORT_CHECK);

    fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
        extract_for(
            error,
            Backends {
                tokio_postgres: true,
                ..Backends::NONE
            },
        )
    }
}

#[cfg(feature = "async-mysql")]
impl AsyncDialect for diesel_async::AsyncMysqlConnection {
    /// `[SET TRANSACTION ISOLATION LEVEL …;] START TRANSACTION [READ ONLY]` in one round
    /// trip: the level applies to the next transaction only, so it goes first.
    fn begin_sql(options: &TxOptions) -> String {
        options.mysql_begin()
    }

    fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
        extract_for(
            error,
            Backends {
                mysql: true,
                mysql_async: true,
                ..Backends::NONE
            },
        )
    }
}
