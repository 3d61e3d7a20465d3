//! The retrying transaction runner, written once for every sqlx database; only the BEGIN
//! statement (and SQLite's read-only switch) differ per database (see [`Backend`]).

use std::future::Future;

use sqlx::pool::PoolConnection;
use sqlx::{Connection, Database, Pool, SqlStr, Transaction};
use txretry_core::{AsError, RetryPolicy, TxFailure, TxOptions};

/// A sqlx database the runners support: [`Postgres`](sqlx::Postgres) (feature `postgres`),
/// [`MySql`](sqlx::MySql) (feature `mysql`, also MariaDB) and `Sqlite` (feature `sqlite`).
///
/// It says how each database begins a transaction with [`TxOptions`]; it is sealed, and its
/// methods are internal.
pub trait Backend: Database + sealed::Sealed {
    /// The statement that begins a transaction with `options`, built only from fixed
    /// strings (never from user text).
    #[doc(hidden)]
    fn begin_statement(options: &TxOptions) -> SqlStr;

    /// A statement to run inside the transaction right after BEGIN, if any (SQLite:
    /// `PRAGMA query_only = ON`, which would make `BEGIN IMMEDIATE` itself fail if set
    /// before it).
    #[doc(hidden)]
    fn after_begin(options: &TxOptions) -> Option<&'static str>;

    /// What must happen to the connection's session after the transaction ends.
    #[doc(hidden)]
    fn session_cleanup(options: &TxOptions) -> Cleanup;

    /// Runs one of the fixed statements above on the connection.
    #[doc(hidden)]
    fn run_statement<'c>(
        conn: &'c mut Self::Connection,
        sql: &'static str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'c;
}

/// What the session needs after a transaction with some options.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cleanup {
    /// Nothing: BEGIN's options lasted for that transaction only.
    Nothing,
    /// Run this statement (SQLite: `PRAGMA query_only = OFF`); discard the connection if it fails.
    Sql(&'static str),
    /// BEGIN set a one-shot session characteristic first (MySQL `SET TRANSACTION`): if the
    /// transaction never began, it may still be pending, so discard the connection.
    DiscardIfBeginFailed,
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// Runs `f` in a transaction on a connection from `pool`, and runs the whole transaction
/// again when it fails transiently (deadlock, lock timeout, serialization failure,
/// `SQLITE_BUSY`, as `policy` decides). The transaction begins with the database's defaults
/// (on SQLite: `BEGIN IMMEDIATE`); see [`transaction_with`] for options.
///
/// `f` is an async closure taking `&mut sqlx::Transaction<'_, DB>`; run queries on
/// `&mut **tx`. It is called once per attempt, each time with a fresh transaction on a
/// connection freshly acquired from the pool, so it must not rely on what an earlier attempt
/// did (and anything it changes outside the database happens once per attempt).
/// On `Ok` the runner commits; on `Err` it rolls back explicitly, then retries or returns
/// the error. The last error is returned unchanged; `E` is any error type that sqlx's
/// errors convert into (`sqlx::Error`, your own `thiserror` enum, `anyhow::Error`,
/// `Box<dyn Error + Send + Sync>`).
///
/// - A failure at COMMIT without a server code (the connection dropped while committing) is
///   ambiguous, since the commit may have landed: never retried unless the policy is
///   [`idempotent`](txretry_core::RetryPolicyBuilder::idempotent).
/// - The connection is closed instead of returned to the pool when the failure was a
///   connection failure or detected by the driver (see
///   [`TxFailure::discards_connection`]), when ROLLBACK fails, or when the runner's future
///   is dropped while session settings from [`TxOptions`] are in force.
///
/// # `Send` and `tokio::spawn`
/// The returned future owns clones of the pool handle, the policy and the options (all
/// cheap), so it borrows nothing from the caller except through `f`. It is `Send` when `f`
/// **owns** what it captures: write `async move |tx| …` and move in owned values, `Copy`
/// values or `Arc`s (clone them per call if needed). Then
/// `tokio::spawn(transaction(&pool, &policy, async move |tx| …))` compiles as it is.
///
/// A closure that borrows from its surroundings (a plain `async |tx|` that uses a local,
/// or even a reference moved in) works wherever `Send` is not required, but current rustc
/// cannot prove the runner's future `Send` with it: the borrow is reported as "does not
/// live long enough" or "implementation of `Send` is not general enough"
/// (rust-lang/rust#110338, #138494). This holds for any generic function taking an
/// `AsyncFnMut`; the fix is to make the closure own its captures.
///
/// Do not wrap the runner in another retry loop (`policy.run(async || …)`): it already
/// retries, and an async closure wrapping borrowed state defeats the `Send` proof too
/// (rust-lang/rust#100013).
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// async fn transfer(pool: &sqlx::PgPool, from: i64, to: i64, amount: i64) -> Result<(), sqlx::Error> {
///     let policy = txretry_core::RetryPolicy::default();
///     // `move`: the closure owns its captures, so this future is Send.
///     txretry_sqlx::transaction(pool, &policy, async move |tx| {
///         sqlx::query("UPDATE account SET balance = balance - $1 WHERE id = $2")
///             .bind(amount)
///             .bind(from)
///             .execute(&mut **tx)
///             .await?;
///         sqlx::query("UPDATE account SET balance = balance + $1 WHERE id = $2")
///             .bind(amount)
///             .bind(to)
///             .execute(&mut **tx)
///             .await?;
///         Ok(())
///     })
///     .await
/// }
/// ```
pub fn transaction<DB, T, E, V, F>(
    pool: &Pool<DB>,
    policy: &RetryPolicy,
    f: F,
) -> impl Future<Output = Result<T, E>> + use<DB, T, E, V, F>
where
    DB: Backend,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<V>,
{
    run(pool.clone(), policy.clone(), TxOptions::default(), f)
}

/// [`transaction`] with options: each attempt begins with
///
/// | database | statement |
/// |---|---|
/// | Postgres | `BEGIN [ISOLATION LEVEL …] [READ ONLY]` |
/// | MySQL / MariaDB | `[SET TRANSACTION ISOLATION LEVEL …;] START TRANSACTION [READ ONLY]` |
/// | SQLite | `BEGIN DEFERRED` / `BEGIN IMMEDIATE` (the default) / `BEGIN EXCLUSIVE`, then `PRAGMA query_only = ON` when read-only |
///
/// SQLite ignores the isolation level (its transactions are serializable). Its read-only
/// switch belongs to the connection, so the runner turns it off again after the
/// transaction, and closes the connection if that fails.
///
/// Under a policy with [`Admission`](txretry_core::Admission), each attempt first waits
/// for the keys named with [`TxOptions::contends_on`], and releases them when the attempt
/// ends.
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// async fn report(pool: &sqlx::PgPool) -> Result<i64, sqlx::Error> {
///     use txretry_core::{Isolation, RetryPolicy, TxOptions};
///     let options = TxOptions::new().isolation(Isolation::Serializable).read_only(true);
///     txretry_sqlx::transaction_with(pool, &RetryPolicy::default(), &options, async |tx| {
///         sqlx::query_scalar("SELECT sum(balance) FROM account").fetch_one(&mut **tx).await
///     })
///     .await
/// }
/// ```
pub fn transaction_with<DB, T, E, V, F>(
    pool: &Pool<DB>,
    policy: &RetryPolicy,
    options: &TxOptions,
    f: F,
) -> impl Future<Output = Result<T, E>> + use<DB, T, E, V, F>
where
    DB: Backend,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<V>,
{
    run(pool.clone(), policy.clone(), options.clone(), f)
}

/// The runner proper. It owns its pool handle, policy and options (all cheap clones), so
/// the future it returns borrows nothing from the caller but `f`.
async fn run<DB, T, E, V, F>(
    pool: Pool<DB>,
    policy: RetryPolicy,
    options: TxOptions,
    mut f: F,
) -> Result<T, E>
where
    DB: Backend,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<V>,
{
    let (pool, policy, options) = (&pool, &policy, &options);
    let cleanup = DB::session_cleanup(options);
    txretry_core::retry_async!(policy, options = options, async {
        let conn = match pool.acquire().await {
            Ok(conn) => conn,
            Err(error) => return Err(TxFailure::in_body(policy, E::from(error))),
        };
        // From here until the session is known clean, dropping the lease (the caller
        // dropped our future) closes the connection instead of pooling it.
        let mut lease = Lease {
            conn,
            discard_on_drop: cleanup != Cleanup::Nothing,
        };

        // Everything that borrows the connection ends inside this block; then the lease
        // restores the session or marks the connection for closing.
        let (result, discard) = {
            match lease.conn.begin_with(DB::begin_statement(options)).await {
                Err(error) => {
                    let failure = TxFailure::in_body(policy, E::from(error));
                    let discard =
                        failure.discards_connection() || cleanup == Cleanup::DiscardIfBeginFailed;
                    (Err(failure), discard)
                }
                Ok(mut tx) => {
                    if cleanup == Cleanup::DiscardIfBeginFailed {
                        // The one-shot setting was consumed by this transaction.
                        lease.discard_on_drop = false;
                    }
                    // A failed setup statement is handled like a failed closure.
                    let body = match DB::after_begin(options) {
                        Some(sql) => DB::run_statement(&mut tx, sql).await.map_err(E::from),
                        None => Ok(()),
                    };
                    let body = match body {
                        Ok(()) => f(&mut tx).await,
                        Err(error) => Err(error),
                    };
                    match body {
                        Ok(value) => match tx.commit().await {
                            Ok(()) => (Ok(value), false),
                            Err(error) => {
                                // The failed Transaction queued a ROLLBACK on drop; the pool
                                // flushes it when the connection comes back.
                                let failure = TxFailure::at_commit(policy, E::from(error));
                                let discard = failure.discards_connection();
                                (Err(failure), discard)
                            }
                        },
                        Err(error) => {
                            let failure = TxFailure::in_body(policy, error);
                            // Always roll back before deciding: after MySQL 1205 the
                            // transaction is still open, with the statements before the
                            // timeout applied.
                            let rolled_back = tx.rollback().await.is_ok();
                            let discard = !rolled_back || failure.discards_connection();
                            (Err(failure), discard)
                        }
                    }
                }
            }
        };
        lease.finish(cleanup, discard).await;
        result
    })
}

/// A pooled connection the runner holds for one attempt.
struct Lease<DB: Database> {
    conn: PoolConnection<DB>,
    /// Close the connection (instead of returning it to the pool) when dropped.
    discard_on_drop: bool,
}

impl<DB: Backend> Lease<DB> {
    /// Ends the attempt's use of the connection: restores the session, or marks the
    /// connection to be closed when `discard` or when restoring fails.
    async fn finish(&mut self, cleanup: Cleanup, discard: bool) {
        let clean = !discard
            && match cleanup {
                Cleanup::Nothing | Cleanup::DiscardIfBeginFailed => true,
                Cleanup::Sql(sql) => DB::run_statement(&mut self.conn, sql).await.is_ok(),
            };
        self.discard_on_drop = !clean;
    }
}

impl<DB: Database> Drop for Lease<DB> {
    fn drop(&mut self) {
        if self.discard_on_drop {
            // Closes the connection (gracefully, with a timeout, in the background) and
            // lets the pool open a replacement.
            self.conn.close_on_drop();
        }
    }
}
