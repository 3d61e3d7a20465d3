//! The runner: one `retry_blocking!` around one attempt, BEGIN and COMMIT driven through
//! Diesel's own transaction manager, so the runner knows which of them failed (the commit
//! boundary) and Diesel's bookkeeping stays right for the caller's later transactions.

use diesel::connection::{AnsiTransactionManager, TransactionManager};
use diesel::result::Error;
use txretry_core::{AsError, RetryPolicy, RetryState, TxError, TxFailure, TxOptions};

use crate::backend::{Dialect, RetryConnection};
use crate::nested::NestedTransactionLeftOpen;

/// Runs `f` in a transaction on `conn`, committing when it returns `Ok`; when an attempt
/// fails with an error `policy` retries, rolls back, waits, and runs `f` again in a fresh
/// transaction. Blocking: waits with `std::thread::sleep`.
///
/// Diesel's own [`Connection::transaction`](diesel::Connection::transaction), retried
/// whole. The same as [`transaction_with`] with [`TxOptions::default()`] (the server's
/// isolation level, read-write, `BEGIN IMMEDIATE` on SQLite); see there for what happens on
/// each kind of failure and to the connection.
///
/// `E` is whatever `f` returns, as with Diesel: `diesel::result::Error`, your own error
/// type with a `From<diesel::result::Error>` impl, `anyhow::Error` or
/// `Box<dyn Error + Send + Sync>`. The last error is returned unchanged inside a
/// [`TxError`], which also says how the call went ([`TxError::outcome`]: the verdict,
/// the phase, the attempts).
///
/// ```
/// use diesel::connection::SimpleConnection;
/// use diesel::prelude::*;
/// use txretry::{Phase, RetryPolicy, Verdict};
///
/// #[derive(Debug, thiserror::Error)]
/// enum TransferError {
///     #[error("insufficient funds")]
///     InsufficientFunds,
///     #[error(transparent)]
///     Db(#[from] diesel::result::Error),
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut conn = SqliteConnection::establish(":memory:")?;
/// conn.batch_execute(
///     "CREATE TABLE account (id INTEGER PRIMARY KEY, balance BIGINT NOT NULL);
///      INSERT INTO account VALUES (1, 10), (2, 0);",
/// )?;
///
/// let policy = RetryPolicy::default();
/// let result = txretry::diesel::transaction(&mut conn, &policy, |conn| {
///     let balance: i64 = diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(
///         "(SELECT balance FROM account WHERE id = 1)",
///     ))
///     .get_result(conn)?;
///     if balance < 50 {
///         return Err(TransferError::InsufficientFunds); // rolled back, returned once
///     }
///     diesel::sql_query("UPDATE account SET balance = balance - 50 WHERE id = 1").execute(conn)?;
///     diesel::sql_query("UPDATE account SET balance = balance + 50 WHERE id = 2").execute(conn)?;
///     Ok(())
/// });
/// let err = result.unwrap_err();
/// assert!(matches!(err.error(), TransferError::InsufficientFunds));
/// // Your own error is permanent: returned after one attempt, before COMMIT.
/// assert_eq!(err.outcome().verdict(), Verdict::Permanent);
/// assert_eq!(err.outcome().phase(), Phase::Body);
/// assert_eq!(err.outcome().attempts(), 1);
/// # Ok(())
/// # }
/// ```
pub fn transaction<C, T, E, Via, F>(
    conn: &mut C,
    policy: &RetryPolicy,
    f: F,
) -> Result<T, TxError<E>>
where
    C: RetryConnection,
    F: FnMut(&mut C) -> Result<T, E>,
    E: From<Error> + AsError<Via>,
{
    transaction_with(conn, policy, &TxOptions::default(), f)
}

/// [`transaction`] with options: isolation level, read-only, how SQLite begins, and
/// whether the call is idempotent.
///
/// # Each attempt
/// 1. begins through Diesel's transaction manager
///    ([`AnsiTransactionManager::begin_transaction_sql`]), so Diesel counts the transaction
///    open and `f` may nest `conn.transaction(…)` (savepoints) as usual:
///    - Postgres: `BEGIN [ISOLATION LEVEL …] [READ ONLY]`, what `build_transaction()`
///      sends;
///    - MySQL/MariaDB: `[SET TRANSACTION ISOLATION LEVEL …;] START TRANSACTION [READ ONLY]`
///      in one round trip;
///    - SQLite: [`TxOptions::sqlite_begin`]: `BEGIN IMMEDIATE` by default (two writers
///      queue on the busy timeout, or fail at BEGIN with `SQLITE_BUSY`, instead of both
///      reading and failing to upgrade), `DEFERRED` / `EXCLUSIVE` on request. Read-only:
///      `PRAGMA query_only = ON` for the transaction's duration (put back afterwards) and
///      `BEGIN DEFERRED`. The isolation level is ignored: SQLite is serializable;
/// 2. calls `f` with the connection. `f` may run several times: keep side effects outside
///    the database out of it, or make them idempotent;
/// 3. on `Ok`, commits (on Postgres after a `SELECT 1`, see below); returns `Ok` only once
///    the COMMIT succeeded. When `f` returns `Ok` with a nested transaction still open (a
///    savepoint begun by hand), COMMIT would only release its savepoint: the runner rolls
///    every level back instead and fails with
///    [`NestedTransactionLeftOpen`] (permanent);
/// 4. on `Err`, rolls back before deciding, every level `f` left open included (MySQL's
///    1205 leaves the transaction open with the earlier statements applied), then retries when
///    the policy retries the error's kind.
///
/// # The commit boundary
/// A failed COMMIT is judged apart ([`Phase::Commit`](txretry_core::Phase::Commit)): only
/// the server's own "not committed" answers keep their verdict (a serialization failure
/// or deadlock at COMMIT, `SQLITE_BUSY` at COMMIT, a deferred constraint). A lost
/// connection, or a connection-class code (a pooler answers a COMMIT that landed with
/// `08P01` or MySQL's 2013), is [`Ambiguous`](txretry_core::Verdict::Ambiguous): the
/// commit may have happened, and the call is not run again unless `options` are
/// [`idempotent`](TxOptions::idempotent) — and even then not on this connection, see
/// below. Diesel's own `Error::RollbackErrorOnCommit` (the COMMIT failed and so did the
/// ROLLBACK after it) is judged by its COMMIT error, and ends the loop.
///
/// # A transaction of your own around it
/// The runner begins through Diesel's transaction manager, so inside `conn.transaction(…)`
/// it refuses to nest (Diesel counts the outer one). A `BEGIN` sent by hand
/// (`batch_execute("BEGIN")`) is one Diesel does not count: on Postgres the runner's BEGIN
/// only warns, and its COMMIT commits the work before it too; on MySQL the runner's BEGIN
/// commits that work at once. Begin through Diesel, or not at all.
///
/// # Errors inside the closure
/// Propagate database errors out of `f` (with `?`): the runner retries only what it sees.
/// On Postgres, a swallowed error leaves the transaction aborted, and Postgres answers a
/// plain COMMIT of an aborted transaction by rolling back without an error; the runner's
/// `SELECT 1` before COMMIT fails with `25P02` instead, and the runner returns that
/// (permanent: the real cause was swallowed). On MySQL/MariaDB a swallowed deadlock is
/// undetectable: the server already rolled the transaction back, and `f`'s later
/// statements run, and commit, on their own.
///
/// # Codes Diesel dropped
/// The runner classifies with its backend's part of [`extract`](crate::extract): the
/// Postgres SQLSTATE as Diesel keeps it; the MySQL errno and the SQLite result code
/// recovered from the exact text the driver prints (see there).
///
/// # The connection
/// There is no pool: every attempt runs on `conn`, and the runner cannot open another.
/// So it returns the error at once, whatever the policy says, when the attempt left `conn`
/// unusable: a connection failure (a connection-class or failover code, Diesel's
/// `ClosedConnection`, MySQL's 2006/2013), a ROLLBACK that failed, or Diesel's transaction
/// manager left broken. The outcome's
/// [`stop_reason`](txretry_core::Outcome::stop_reason) is then
/// [`ConnectionUnusable`](txretry_core::StopReason::ConnectionUnusable): establish a new
/// connection (or take one from your r2d2 pool) and call the runner again once you know
/// whether an ambiguous commit landed. This includes an ambiguous COMMIT on an idempotent
/// call.
///
/// Otherwise `conn` comes back with no transaction open. If `f` panics, the runner rolls
/// the transaction back (and puts SQLite's `query_only` back) as the panic unwinds.
/// Calling the runner inside an open Diesel transaction fails at once with Diesel's
/// `AlreadyInTransaction` (permanent), leaving that transaction alone.
///
/// [`TxOptions::contends_on`] keys are not used: the policy's
/// [`Admission`](txretry_core::Admission) applies to the async runners only (as with
/// `txretry::rusqlite`).
///
/// # Threads
/// The runner blocks its thread, including while it waits between attempts. From async
/// code call it inside `tokio::task::spawn_blocking` with a connection the closure owns.
///
/// A serializable transaction on Postgres (needs a server, and the `postgres` feature):
///
#[cfg_attr(feature = "postgres", doc = "```no_run")]
#[cfg_attr(not(feature = "postgres"), doc = "```ignore")]
/// use diesel::prelude::*;
/// use txretry::{Isolation, RetryPolicy, TxOptions};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut conn = PgConnection::establish("postgres://postgres@127.0.0.1/test")?;
/// let policy = RetryPolicy::builder().max_attempts(5).build()?;
/// let serializable = TxOptions::new().isolation(Isolation::Serializable);
/// let moved = txretry::diesel::transaction_with(&mut conn, &policy, &serializable, |conn| {
///     diesel::sql_query("UPDATE account SET balance = balance - 10 WHERE id = 1").execute(conn)?;
///     diesel::sql_query("UPDATE account SET balance = balance + 10 WHERE id = 2").execute(conn)
/// })?;
/// # let _ = moved;
/// # Ok(())
/// # }
/// ```
pub fn transaction_with<C, T, E, Via, F>(
    conn: &mut C,
    policy: &RetryPolicy,
    options: &TxOptions,
    mut f: F,
) -> Result<T, TxError<E>>
where
    C: RetryConnection,
    F: FnMut(&mut C) -> Result<T, E>,
    E: From<Error> + AsError<Via>,
{
    let mut state = RetryState::new(policy, options);
    txretry_core::retry_blocking!(state, attempt(conn, policy, options, &mut f))
}

/// One attempt: BEGIN, `f`, COMMIT; ROLLBACK on any error.
fn attempt<C, T, E, Via, F>(
    conn: &mut C,
    policy: &RetryPolicy,
    options: &TxOptions,
    f: &mut F,
) -> Result<T, TxFailure<E>>
where
    C: Dialect,
    F: FnMut(&mut C) -> Result<T, E>,
    E: From<Error> + AsError<Via>,
{
    let mut tx = match Open::begin(conn, options) {
        Ok(tx) => tx,
        // Diesel counts a transaction only once BEGIN succeeded: nothing to roll back.
        Err(error) => {
            let failure = TxFailure::in_body(policy, C::extract, E::from(error)).under(options);
            return Err(unless_usable(failure, true));
        }
    };
    let body = f(tx.conn)
        .and_then(|value| {
            let depth =
                AnsiTransactionManager::transaction_manager_status_mut(tx.conn).transaction_depth();
            match NestedTransactionLeftOpen::at(depth) {
                None => Ok(value),
                Some(error) => Err(E::from(error)),
            }
        })
        .and_then(|value| C::before_commit(tx.conn).map(|()| value).map_err(E::from));
    let value = match body {
        Ok(value) => value,
        Err(error) => {
            let usable = tx.roll_back();
            let failure = TxFailure::in_body(policy, C::extract, error).under(options);
            return Err(unless_usable(failure, usable));
        }
    };
    match tx.commit() {
        Ok(()) => Ok(value),
        Err(error) => {
            // Diesel has already rolled back whatever a failed COMMIT left open; this
            // only asks whether it managed to.
            let usable = !matches!(error, Error::RollbackErrorOnCommit { .. }) && tx.roll_back();
            let failure = TxFailure::at_commit(policy, C::extract, E::from(error));
            Err(unless_usable(failure, usable))
        }
    }
}

/// The failure, ending the loop when the connection cannot run another attempt: `usable`
/// is false, or the error itself says the connection broke.
pub(crate) fn unless_usable<E>(failure: TxFailure<E>, usable: bool) -> TxFailure<E> {
    if usable && !failure.discards_connection() {
        failure
    } else {
        failure.ends_retrying()
    }
}

/// A transaction the runner began on `conn`. Dropped while still open (when `f`
/// panics), it rolls back; dropped in any case, it puts back what the options changed on
/// the connection (SQLite's `query_only`).
struct Open<'c, C: Dialect> {
    conn: &'c mut C,
    open: bool,
    cleanup: Option<&'static str>,
}

impl<'c, C: Dialect> Open<'c, C> {
    fn begin(conn: &'c mut C, options: &TxOptions) -> Result<Self, Error> {
        let cleanup = C::begin(conn, options)?;
        Ok(Open {
            conn,
            open: true,
            cleanup,
        })
    }

    /// Ends the transaction with ROLLBACK, if Diesel still counts it open, and every
    /// nested transaction the closure left open before it; whether the connection can run
    /// another transaction.
    fn roll_back(&mut self) -> bool {
        self.open = false;
        // Each ROLLBACK (TO SAVEPOINT) that succeeds ends one level, so this ends; asked
        // with no transaction counted open, Diesel sends nothing.
        loop {
            match AnsiTransactionManager::rollback_transaction(self.conn) {
                Ok(()) => {}
                Err(Error::NotInTransaction) => return true,
                Err(Error::BrokenTransactionManager) => return false,
                // The ROLLBACK failed. Asking again tells whether Diesel still counts
                // one (the server may have ended it itself: SQLite after some failures),
                // or gave up on the connection.
                Err(_) => match AnsiTransactionManager::rollback_transaction(self.conn) {
                    Ok(()) => {}
                    Err(Error::NotInTransaction) => return true,
                    Err(_) => return false,
                },
            }
        }
    }

    fn commit(&mut self) -> Result<(), Error> {
        self.open = false;
        AnsiTransactionManager::commit_transaction(self.conn)
    }
}

impl<C: Dialect> Drop for Open<'_, C> {
    fn drop(&mut self) {
        if self.open {
            // `f` panicked: nobody to report a failed ROLLBACK to; Diesel then counts the
            // connection broken, and says so on its next use.
            let _ = self.roll_back();
        }
        if let Some(sql) = self.cleanup {
            // Setting a flag pragma does not fail short of running out of memory; the
            // transaction's outcome stands either way.
            let _ = self.conn.batch_execute(sql);
        }
    }
}
