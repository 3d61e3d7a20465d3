//! The async runner: one `retry_async!` around one attempt on a diesel-async connection,
//! BEGIN and COMMIT driven through diesel-async's own transaction manager, so the runner
//! knows which of them failed (the commit boundary) and diesel-async's bookkeeping stays
//! right for the caller's later transactions.

use std::future::Future;

use diesel::result::Error;
use diesel_async::{AnsiTransactionManager, TransactionManager};
use txretry_core::{AsError, RetryPolicy, RetryState, TxError, TxFailure, TxOptions};

use crate::async_backend::AsyncRetryConnection;
use crate::nested::NestedTransactionLeftOpen;
use crate::runner::unless_usable;

/// Runs `f` in a transaction on `conn`, committing when it returns `Ok`; when an attempt
/// fails with an error `policy` retries, rolls back, waits (tokio's timer) and runs `f`
/// again in a fresh transaction.
///
/// diesel-async's own [`AsyncConnection::transaction`](diesel_async::AsyncConnection::transaction),
/// retried whole: `f` is an async closure taking the connection, called once per attempt
/// (`AsyncFnMut`, where diesel-async's takes an `AsyncFnOnce`). The same as
/// [`async_transaction_with`] with [`TxOptions::default()`] (the server's isolation level,
/// read-write); see there for what happens on each kind of failure and to the connection.
///
/// `E` is whatever `f` returns: `diesel::result::Error`, your own error type with a
/// `From<diesel::result::Error>` impl, `anyhow::Error` or `Box<dyn Error + Send + Sync>`.
/// The last error is returned unchanged inside a [`TxError`], which also says how the call
/// went ([`TxError::outcome`]: the verdict, the phase, the attempts).
///
#[cfg_attr(feature = "async-postgres", doc = "```no_run")]
#[cfg_attr(not(feature = "async-postgres"), doc = "```ignore")]
/// use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
/// use txretry::{RetryPolicy, TxError};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let mut conn = AsyncPgConnection::establish("postgres://postgres@127.0.0.1/test").await?;
/// let policy = RetryPolicy::default();
/// let moved = txretry::diesel::async_transaction(&mut conn, &policy, async |conn| {
///     diesel::sql_query("UPDATE account SET balance = balance - 30 WHERE id = 1")
///         .execute(conn)
///         .await?;
///     diesel::sql_query("UPDATE account SET balance = balance + 30 WHERE id = 2")
///         .execute(conn)
///         .await?;
///     Ok::<_, diesel::result::Error>(30)
/// })
/// .await
/// .map_err(TxError::into_error)?; // back to diesel::result::Error
/// assert_eq!(moved, 30);
/// # Ok(())
/// # }
/// ```
pub fn async_transaction<'c, C, T, E, Via, F>(
    conn: &'c mut C,
    policy: &RetryPolicy,
    f: F,
) -> impl Future<Output = Result<T, TxError<E>>> + use<'c, C, T, E, Via, F>
where
    C: AsyncRetryConnection,
    F: AsyncFnMut(&mut C) -> Result<T, E>,
    E: From<Error> + AsError<Via>,
{
    run(conn, policy.clone(), TxOptions::default(), f)
}

/// [`async_transaction`] with options: isolation level, read-only, whether the call is
/// idempotent, and the keys it contends on.
///
/// # Each attempt
/// 1. begins through diesel-async's transaction manager
///    ([`AnsiTransactionManager::begin_transaction_sql`]), so diesel-async counts the
///    transaction open and `f` may nest `conn.transaction(…)` (savepoints) as usual:
///    - Postgres: `BEGIN [ISOLATION LEVEL …] [READ ONLY]`, what `build_transaction()`
///      sends;
///    - MySQL/MariaDB: `[SET TRANSACTION ISOLATION LEVEL …;] START TRANSACTION [READ ONLY]`
///      in one round trip;
/// 2. calls `f` with the connection. `f` may run several times: keep side effects outside
///    the database out of it, or make them idempotent;
/// 3. on `Ok`, commits (on Postgres after a `SELECT 1`, see below); returns `Ok` only once
///    the COMMIT succeeded. When `f` returns `Ok` with a nested transaction still open (a
///    `conn.transaction(…)` whose future a timeout or `select!` dropped), COMMIT would only
///    release its savepoint: the runner rolls every level back instead and fails with
///    [`NestedTransactionLeftOpen`] (permanent);
/// 4. on `Err`, rolls back before deciding, every level `f` left open included (MySQL's
///    1205 leaves the transaction open with the earlier statements applied), then retries when
///    the policy retries the error's kind.
///
/// # The commit boundary
/// A failed COMMIT is judged apart ([`Phase::Commit`](txretry_core::Phase::Commit)): only
/// the server's own "not committed" answers keep their verdict (a serialization failure
/// or deadlock at COMMIT, a deferred constraint). A lost connection, or a connection-class
/// code (a pooler answers a COMMIT that landed with `08P01`, a MySQL proxy with 2013), is
/// [`Ambiguous`](txretry_core::Verdict::Ambiguous): the commit may have happened, and the
/// call is not run again unless `options` are [`idempotent`](TxOptions::idempotent) — and
/// even then not on this connection, see below.
///
/// # A transaction of your own around it
/// As for the blocking runner ([`transaction`](crate::transaction#a-transaction-of-your-own-around-it)):
/// a `BEGIN` sent by hand, which diesel-async does not count, is joined or committed by
/// the runner's own. Begin through diesel-async, or not at all.
///
/// # Errors inside the closure
/// Propagate database errors out of `f` (with `?`): the runner retries only what it sees.
/// On Postgres a swallowed error leaves the transaction aborted, and Postgres answers a
/// plain COMMIT of an aborted transaction by rolling back without an error; the runner's
/// `SELECT 1` before COMMIT fails with `25P02` instead, and the runner returns that
/// (permanent: the real cause was swallowed). On MySQL/MariaDB a swallowed deadlock is
/// undetectable: the server already rolled the transaction back, and `f`'s later
/// statements run, and commit, on their own.
///
/// # Codes diesel-async dropped
/// The runner classifies with its backend's part of [`extract`](crate::extract): the
/// Postgres SQLSTATE as diesel-async keeps it; the MySQL errno recovered from the server's
/// text and SQLSTATE (diesel-async, like Diesel, drops it); and the driver failures that
/// diesel-async keeps as text only (tokio-postgres' `connection closed`, mysql_async's
/// `Input/output error: …`, …) as `Code::Driver` (see there).
///
/// # The connection
/// Every attempt runs on `conn`, and the runner cannot open another. So it returns the
/// error at once, whatever the policy says, when the attempt left `conn` unusable: a
/// connection failure (a connection-class or failover code, a driver failure above), a
/// ROLLBACK that failed, or diesel-async's transaction manager left broken. The outcome's
/// [`stop_reason`](txretry_core::Outcome::stop_reason) is then
/// [`ConnectionUnusable`](txretry_core::StopReason::ConnectionUnusable): establish a new
/// connection (or take another from your pool) and call the runner again once you know
/// whether an ambiguous commit landed. This includes an ambiguous COMMIT on an idempotent
/// call. Otherwise `conn` comes back with no transaction open. Calling the runner inside
/// an open transaction fails at once with Diesel's `AlreadyInTransaction` (permanent),
/// leaving that transaction alone.
///
/// A pooled connection (diesel-async's `deadpool`, `bb8`, `mobc` pools) is passed as
/// `&mut *pooled`: the runner uses it as it is, and a connection the runner gave up on is
/// one the pool's own check (`is_broken`: closed, or a transaction left open) discards
/// when it comes back.
///
/// # Cancellation and panics
/// If the returned future is dropped mid-attempt (a timeout), or `f` panics, nothing rolls
/// the transaction back: there is no async drop. diesel-async then still counts the
/// transaction open (or, dropped midway through BEGIN, COMMIT or ROLLBACK, marks the
/// connection broken): its pools discard such a connection when it comes back, and on a
/// plain connection the runner fails at once without running `f`: with Diesel's
/// `AlreadyInTransaction` (permanent) while a transaction is counted open, else with
/// `BrokenTransactionManager` and
/// [`ConnectionUnusable`](txretry_core::StopReason::ConnectionUnusable). Drop that
/// connection and establish a new one rather than rolling back on it: a statement cut off
/// midway may still be answered on it (diesel-async's own advice).
///
/// # Admission
/// Under a policy with [`Admission`](txretry_core::Admission), each attempt first waits for
/// the keys named with [`TxOptions::contends_on`] in this process (one permit per key), and
/// lets them go when the attempt ends. The database's own locks of
/// [`Admission::in_database`](txretry_core::Admission::in_database) are not taken by this
/// runner (yet): use txretry's sqlx or tokio-postgres runner for transactions that must
/// take turns across processes.
///
/// # Send
/// The returned future owns clones of the policy and the options and borrows only `conn`
/// and `f`: it is `Send` when `f`'s futures are, so it can be `tokio::spawn`ed with an
/// owned connection. Let `f` own what it uses (`async move |conn| …` over copied, cloned
/// or `Arc` values).
///
/// A serializable transaction on MySQL/MariaDB (needs a server, and the `async-mysql`
/// feature):
///
#[cfg_attr(feature = "async-mysql", doc = "```no_run")]
#[cfg_attr(not(feature = "async-mysql"), doc = "```ignore")]
/// use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl};
/// use txretry::{Isolation, RetryPolicy, TxOptions};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let mut conn = AsyncMysqlConnection::establish("mysql://root@127.0.0.1:3306/test").await?;
/// let policy = RetryPolicy::builder().max_attempts(5).build()?;
/// let serializable = TxOptions::new().isolation(Isolation::Serializable);
/// let moved = txretry::diesel::async_transaction_with(&mut conn, &policy, &serializable, async |conn| {
///     diesel::sql_query("UPDATE account SET balance = balance - 10 WHERE id = 1")
///         .execute(conn)
///         .await?;
///     diesel::sql_query("UPDATE account SET balance = balance + 10 WHERE id = 2")
///         .execute(conn)
///         .await
/// })
/// .await?;
/// # let _ = moved;
/// # Ok(())
/// # }
/// ```
pub fn async_transaction_with<'c, C, T, E, Via, F>(
    conn: &'c mut C,
    policy: &RetryPolicy,
    options: &TxOptions,
    f: F,
) -> impl Future<Output = Result<T, TxError<E>>> + use<'c, C, T, E, Via, F>
where
    C: AsyncRetryConnection,
    F: AsyncFnMut(&mut C) -> Result<T, E>,
    E: From<Error> + AsError<Via>,
{
    run(conn, policy.clone(), options.clone(), f)
}

/// The runner proper. It owns its policy and options, so its future borrows nothing of
/// the caller's but the connection and `f`.
async fn run<C, T, E, Via, F>(
    conn: &mut C,
    policy: RetryPolicy,
    options: TxOptions,
    mut f: F,
) -> Result<T, TxError<E>>
where
    C: AsyncRetryConnection,
    F: AsyncFnMut(&mut C) -> Result<T, E>,
    E: From<Error> + AsError<Via>,
{
    let mut state = RetryState::new(&policy, &options);
    // The attempt is written inline (not an `async fn` taking `&mut f`): rustc proves the
    // future `Send` only with the closure's concrete type in view (see core's `run.rs`).
    txretry_core::retry_async!(state, admission = &options, async {
        let no_transaction = matches!(
            AnsiTransactionManager::transaction_manager_status_mut(&mut *conn).transaction_depth(),
            Ok(None)
        );
        if no_transaction && AnsiTransactionManager::is_broken_transaction_manager(&mut *conn) {
            // A BEGIN, COMMIT or ROLLBACK of an earlier call was dropped before its answer
            // (the transaction it counted open is a matter of `AlreadyInTransaction`): the
            // session's state is unknown, and diesel-async would panic on the next one.
            let error = E::from(Error::BrokenTransactionManager);
            let failure = TxFailure::in_body(&policy, C::extract, error).under(&options);
            return Err(unless_usable(failure, false));
        }
        let begin = C::begin_sql(&options);
        if let Err(error) = AnsiTransactionManager::begin_transaction_sql(&mut *conn, &begin).await
        {
            // diesel-async counts a transaction only once BEGIN succeeded: nothing to roll
            // back.
            let failure = TxFailure::in_body(&policy, C::extract, E::from(error)).under(&options);
            return Err(unless_usable(failure, true));
        }
        let mut body = f(&mut *conn).await;
        if body.is_ok()
            && let Some(error) = NestedTransactionLeftOpen::at(
                AnsiTransactionManager::transaction_manager_status_mut(&mut *conn)
                    .transaction_depth(),
            )
        {
            body = Err(E::from(error));
        }
        if let (Ok(_), Some(check)) = (&body, C::BEFORE_COMMIT)
            && let Err(error) = conn.batch_execute(check).await
        {
            body = Err(E::from(error));
        }
        let value = match body {
            Ok(value) => value,
            Err(error) => {
                let usable = roll_back(&mut *conn).await;
                let failure = TxFailure::in_body(&policy, C::extract, error).under(&options);
                return Err(unless_usable(failure, usable));
            }
        };
        match AnsiTransactionManager::commit_transaction(&mut *conn).await {
            Ok(()) => Ok(value),
            Err(error) => {
                // diesel-async has already rolled back whatever a failed COMMIT left open;
                // this only asks whether it managed to.
                let usable = !matches!(error, Error::RollbackErrorOnCommit { .. })
                    && roll_back(&mut *conn).await;
                let failure = TxFailure::at_commit(&policy, C::extract, E::from(error));
                Err(unless_usable(failure, usable))
            }
        }
    })
}

/// Ends the attempt's transaction with ROLLBACK, if diesel-async still counts it open,
/// and every nested transaction the closure left open before it; whether the connection
/// can run another transaction.
async fn roll_back<C: AsyncRetryConnection>(conn: &mut C) -> bool {
    // Each ROLLBACK (TO SAVEPOINT) that succeeds ends one level, so this ends; asked with
    // no transaction counted open, diesel-async sends nothing.
    loop {
        match AnsiTransactionManager::rollback_transaction(&mut *conn).await {
            Ok(()) => {}
            Err(Error::NotInTransaction) => return true,
            Err(Error::BrokenTransactionManager) => return false,
            // The ROLLBACK failed. Asking again tells whether diesel-async still counts
            // one (the server may have ended it itself), or gave up on the connection.
            Err(_) => match AnsiTransactionManager::rollback_transaction(&mut *conn).await {
                Ok(()) => {}
                Err(Error::NotInTransaction) => return true,
                Err(_) => return false,
            },
        }
    }
}
