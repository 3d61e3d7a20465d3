//! The retrying transaction runner, written once for every sqlx database; only the BEGIN
//! statement, SQLite's read-only switch and the locks of database-backed admission differ
//! per database (see [`Backend`]).

use std::future::Future;

use sqlx::{Connection, Database, Pool, SqlStr, Transaction};
use txretry_core::__private::{DatabaseLocks, database_locks, note_busy};
use txretry_core::{AsError, RetryPolicy, RetryState, TxError, TxFailure, TxOptions};

use crate::codes::extract;
use crate::lease::Lease;

/// A sqlx database the runners support: [`Postgres`](sqlx::Postgres) (feature `postgres`),
/// [`MySql`](sqlx::MySql) (feature `mysql`, also MariaDB) and `Sqlite` (feature `sqlite`).
///
/// It says how each database begins a transaction with [`TxOptions`]; it is sealed, and its
/// methods are internal.
pub trait Backend: Database + sealed::Sealed {
    /// The statement that begins a transaction with `options`, built only from fixed
    /// strings and numbers (never from user text). With `locks` (only passed when
    /// [`LOCKS`](Backend::LOCKS) is [`LockStyle::InBegin`]), it also takes the locks of
    /// database-backed admission, in the same round trip.
    #[doc(hidden)]
    fn begin_statement(options: &TxOptions, locks: Option<&DatabaseLocks<'_>>) -> SqlStr;

    /// How this database takes the locks of database-backed admission
    /// ([`Admission::in_database`](txretry_core::Admission::in_database)).
    #[doc(hidden)]
    const LOCKS: LockStyle;

    /// Whether the driver itself finishes what a dropped caller left in flight: sqlx's
    /// SQLite worker runs each command to its end and rolls back a BEGIN or a transaction
    /// dropped half way; its Postgres and MySQL connections do not. Then a connection
    /// dropped inside an attempt may go back to the pool; otherwise it is closed.
    #[doc(hidden)]
    const CANCEL_SAFE: bool = false;

    /// [`LockStyle::InBegin`]: run after a BEGIN that took locks failed (it may have left
    /// the session in a failed transaction, holding session-level locks).
    /// [`LockStyle::Session`]: releases the session's locks after the transaction.
    #[doc(hidden)]
    const LOCK_CLEANUP: &'static str;

    /// [`LockStyle::InBegin`]: when a BEGIN that tried the locks first failed with `error`
    /// because another session holds one of them, the statement that ends that failed
    /// transaction and begins again, waiting for the locks; `None` for any other error.
    #[doc(hidden)]
    fn begin_after_busy(
        _options: &TxOptions,
        _locks: &DatabaseLocks<'_>,
        _error: &sqlx::Error,
    ) -> Option<SqlStr> {
        None
    }

    /// [`LockStyle::Session`]: takes the locks before BEGIN, one key at a time; fails with
    /// a database error when one is not granted.
    #[doc(hidden)]
    fn take_locks<'c>(
        conn: &'c mut Self::Connection,
        locks: DatabaseLocks<'c>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'c;

    /// A statement to run inside the transaction right after BEGIN, if any (SQLite:
    /// `PRAGMA query_only = ON` for a read-only transaction, unless the connection already
    /// had it on, which `cleanup` then says).
    #[doc(hidden)]
    fn after_begin(options: &TxOptions, cleanup: Cleanup) -> Option<&'static str>;

    /// What must happen to the connection's session after the transaction ends, found
    /// before BEGIN (SQLite reads whether `query_only` is already on; the others need no
    /// round trip).
    #[doc(hidden)]
    fn session_cleanup<'c>(
        conn: &'c mut Self::Connection,
        options: &'c TxOptions,
    ) -> impl Future<Output = Result<Cleanup, sqlx::Error>> + Send + 'c;

    /// A statement that fails when the transaction is already aborted, run right before
    /// COMMIT (Postgres: `SELECT 1`). Postgres answers the COMMIT of an aborted transaction
    /// (the closure swallowed an error) with a ROLLBACK tag and no error, and sqlx does not
    /// expose the tag or the session's transaction status, so the runner asks.
    #[doc(hidden)]
    fn abort_check() -> Option<&'static str>;

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

/// How a database takes the locks of database-backed admission.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockStyle {
    /// None: the database runs one writer at a time (SQLite).
    None,
    /// In BEGIN's round trip, held until the transaction ends (Postgres).
    InBegin,
    /// Session locks taken before BEGIN, released after the transaction (MySQL).
    Session,
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
/// the error. The last error comes back unchanged inside a [`TxError`], which also says
/// how the attempts went ([`TxError::outcome`]: verdict, phase, attempts); `E` is any error
/// type that sqlx's errors convert into (`sqlx::Error`, your own `thiserror` enum,
/// `anyhow::Error`, `Box<dyn Error + Send + Sync>`).
///
/// - `Ok` means the transaction committed. On Postgres the runner sends `SELECT 1` before
///   COMMIT: if the closure swallowed an error, the transaction is aborted, the check fails
///   with `25P02` ("current transaction is aborted") and that error is returned (a plain
///   COMMIT would have rolled back silently). On MySQL/MariaDB a swallowed deadlock (1213)
///   has already rolled the transaction back and later statements ran on their own: no
///   runner can undo that, so propagate errors with `?`. On SQLite a transaction that
///   SQLite rolled back itself makes COMMIT fail, and that error is returned.
/// - A failure at COMMIT keeps its verdict only when the server said "not committed" (a
///   serialization failure, a deadlock, `SQLITE_BUSY`, a deferred constraint). A lost
///   connection or a connection-class code there (a pooler answers a COMMIT that landed
///   with `08P01`) is [`Ambiguous`](txretry_core::Verdict::Ambiguous): the commit may have
///   landed, so it is never retried unless `options` are
///   [`idempotent`](TxOptions::idempotent).
/// - The connection is closed instead of returned to the pool when the driver's error says
///   it is broken (a connection-class code, an I/O error; judged from the error itself,
///   whatever your classifier says), when ROLLBACK fails, or when the runner's future is
///   dropped inside an attempt (Postgres, MySQL: a statement may be in flight; dropped at
///   once, its pool slot free, while the server runs that statement to its end unless
///   told to notice the client gone: see the troubleshooting guide) or while session
///   settings from [`TxOptions`] are in force or while the session may hold locks of
///   database-backed admission (see [`transaction_with`]).
///
/// # `Send` and `tokio::spawn`
/// The returned future owns clones of the pool handle, the policy and the options (all
/// cheap), so it borrows nothing from the caller except through `f`. It is `Send` when `f`
/// **owns** what it captures: write `async move |tx| …` and move in owned values, `Copy`
/// values or `Arc`s (clone them per call if needed). Then
/// `tokio::spawn(transaction(&pool, &policy, async move |tx| …))` compiles as it is.
///
/// A closure that borrows from its surroundings (a plain `async |tx|` that uses a local
/// or `&self`) works wherever `Send` is not required, but current rustc cannot prove the
/// runner's future `Send` with it: the borrow is reported as "implementation of `Send` is
/// not general enough" (rust-lang/rust#110338, #138494). This holds for any generic
/// function taking an `AsyncFnMut`; the fix is to make the closure own its captures (see
/// the troubleshooting guide, `txretry::docs::troubleshooting`).
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
///     .map_err(txretry_core::TxError::into_error) // back to sqlx::Error
/// }
/// ```
pub fn transaction<DB, T, E, Via, F>(
    pool: &Pool<DB>,
    policy: &RetryPolicy,
    f: F,
) -> impl Future<Output = Result<T, TxError<E>>> + use<DB, T, E, Via, F>
where
    DB: Backend,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<Via>,
{
    run(pool.clone(), policy.clone(), TxOptions::default(), f)
}

/// [`transaction`] with options: each attempt begins with
///
/// | database | statement |
/// |---|---|
/// | Postgres | `BEGIN [ISOLATION LEVEL …] [READ ONLY]` |
/// | MySQL / MariaDB | `[SET TRANSACTION ISOLATION LEVEL …;] START TRANSACTION [READ ONLY]` |
/// | SQLite | `BEGIN DEFERRED` / `BEGIN IMMEDIATE` (the default) / `BEGIN EXCLUSIVE`; read-only: `BEGIN DEFERRED`, then `PRAGMA query_only = ON` |
///
/// SQLite ignores the isolation level (its transactions are serializable). A read-only
/// SQLite transaction always begins `DEFERRED` (it never takes the write lock), and its
/// read-only switch belongs to the connection: the runner turns it back off afterwards
/// unless the connection already had it on, and closes the connection if that fails.
///
/// Under a policy with [`Admission`](txretry_core::Admission), each attempt first waits
/// for the keys named with [`TxOptions::contends_on`], and releases them when the attempt
/// ends. With [`Admission::in_database`](txretry_core::Admission::in_database) the
/// admitted attempt also takes one lock per key on the database, so that processes take
/// turns too (with
/// [`only_for_contended_keys`](txretry_core::Admission::only_for_contended_keys), only
/// while one of its keys is contended):
///
/// - Postgres: tried in BEGIN's own round trip (the messages are shown in the
///   `txretry::docs::admission` guide); when another session holds a key, the attempt
///   waits for it in one more round trip, before the transaction's snapshot, so
///   REPEATABLE READ and SERIALIZABLE transactions see what the previous holder
///   committed (a key found held or collided within the last second is waited for at
///   once, without the try). A lock not granted within the wait fails the attempt with
///   Postgres' own `55P03` (`LockTimeout`); the runner then sends
///   `ROLLBACK; SELECT pg_advisory_unlock_all()` before the connection goes back to the
///   pool.
/// - MySQL / MariaDB: one `SELECT` of `GET_LOCK(…)` for all the keys before BEGIN (one
///   round trip) and `DO RELEASE_ALL_LOCKS()` after COMMIT or ROLLBACK (one more). A lock not granted in
///   time fails the attempt with a [`sqlx::Error::Database`] holding a
///   [`LockNotGranted`](crate::LockNotGranted) (errno 1205, `LockTimeout`).
/// - SQLite: nothing (one writer at a time already).
///
/// A connection is closed instead of pooled when the runner's future is dropped while its
/// session may hold such locks, or when they could not be released.
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
///     .map_err(txretry_core::TxError::into_error)
/// }
/// ```
pub fn transaction_with<DB, T, E, Via, F>(
    pool: &Pool<DB>,
    policy: &RetryPolicy,
    options: &TxOptions,
    f: F,
) -> impl Future<Output = Result<T, TxError<E>>> + use<DB, T, E, Via, F>
where
    DB: Backend,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<Via>,
{
    run(pool.clone(), policy.clone(), options.clone(), f)
}

/// The runner proper. It owns its pool handle, policy and options (all cheap clones), so
/// the future it returns borrows nothing from the caller but `f`.
async fn run<DB, T, E, Via, F>(
    pool: Pool<DB>,
    policy: RetryPolicy,
    options: TxOptions,
    mut f: F,
) -> Result<T, TxError<E>>
where
    DB: Backend,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<Via>,
{
    let mut state = RetryState::new(&policy, &options);
    txretry_core::retry_async!(state, admission = &options, async {
        // Database-backed admission: the locks this attempt takes on the database, if any
        // (asked per attempt: with `only_for_contended_keys` a collision turns them on).
        let locks = match DB::LOCKS {
            LockStyle::None => None,
            LockStyle::InBegin | LockStyle::Session => database_locks(&policy, &options),
        };
        let locks_in_begin = locks.filter(|_| DB::LOCKS == LockStyle::InBegin);
        let body = |error: E| TxFailure::in_body(&policy, extract, error).under(&options);
        let conn = pool.acquire().await.map_err(|e| body(E::from(e)))?;
        // Until BEGIN has answered, dropping the lease (the caller dropped our future)
        // closes the connection instead of pooling it: a BEGIN sent and not yet answered
        // opens a transaction no `Transaction` knows of (sqlx rolls back nothing at depth
        // 0), and the next user of a pooled connection would write into it, never to commit.
        let mut lease = Lease {
            conn: Some(conn),
            discard_on_drop: true,
            session_locks: false,
            finished: false,
        };
        let cleanup = match DB::session_cleanup(lease.conn(), &options).await {
            Ok(cleanup) => cleanup,
            Err(error) => {
                // Answered: nothing is in flight, so the connection closes gracefully.
                lease.finished = true;
                return Err(body(E::from(error)));
            }
        };
        if DB::CANCEL_SAFE {
            // A clean session pools even when dropped inside BEGIN (an in-memory SQLite
            // database lives as long as its connection).
            lease.discard_on_drop = cleanup != Cleanup::Nothing;
        }

        if let Some(locks) = locks.filter(|_| DB::LOCKS == LockStyle::Session) {
            // From the first request on, the session may hold locks: the lease releases
            // them when the attempt ends, or closes the connection.
            lease.session_locks = true;
            if let Err(error) = DB::take_locks(lease.conn(), locks).await {
                let failure = body(E::from(error));
                let discard = failure.discards_connection();
                lease.finish(cleanup, discard).await;
                return Err(failure);
            }
        }
        // Everything that borrows the connection ends inside this block; then the lease
        // restores the session or marks the connection for closing.
        let begin = DB::begin_statement(&options, locks_in_begin.as_ref());
        let (result, mut discard, begin_failed, commit_failed) = {
            let first = Lease::live(&mut lease.conn).begin_with(begin).await;
            let wait = match (&first, locks_in_begin) {
                (Err(error), Some(locks)) => DB::begin_after_busy(&options, &locks, error),
                _ => None,
            };
            let begun = match wait {
                // A key was locked by another session when BEGIN tried it: wait for
                // it, in the same attempt (nothing of the transaction has run).
                Some(wait) => {
                    drop(first);
                    note_busy(&policy, &options);
                    Lease::live(&mut lease.conn).begin_with(wait).await
                }
                None => first,
            };
            match begun {
                Err(error) => {
                    let failure = body(E::from(error));
                    let discard =
                        failure.discards_connection() || cleanup == Cleanup::DiscardIfBeginFailed;
                    (Err(failure), discard, true, false)
                }
                Ok(mut tx) => {
                    // The transaction is known to sqlx now (a dropped attempt rolls it
                    // back), and a one-shot setting was consumed by it; only SQLite's
                    // read-only switch still needs restoring. Dropped from here on, a
                    // Postgres or MySQL connection is still closed, not pooled: a statement
                    // may be in flight, and sqlx's way back to the pool (a ping that reads
                    // the dropped statement's error, then a hard close) waits over TLS until
                    // the server speaks, which an idle server never does, and keeps the
                    // pool's slot meanwhile. The lease drops it at once (see its `Drop`).
                    lease.discard_on_drop = !DB::CANCEL_SAFE || matches!(cleanup, Cleanup::Sql(_));
                    // A failed setup statement, or a failed abort check, is handled like a
                    // failed closure: COMMIT has not been sent.
                    let setup = match DB::after_begin(&options, cleanup) {
                        Some(sql) => DB::run_statement(&mut tx, sql).await.map_err(E::from),
                        None => Ok(()),
                    };
                    let value = match setup {
                        Ok(()) => f(&mut tx).await,
                        Err(error) => Err(error),
                    };
                    let value = match (value, DB::abort_check()) {
                        (Ok(value), Some(sql)) => DB::run_statement(&mut tx, sql)
                            .await
                            .map(|()| value)
                            .map_err(E::from),
                        (value, _) => value,
                    };
                    match value {
                        Ok(value) => match tx.commit().await {
                            Ok(()) => (Ok(value), false, false, false),
                            Err(error) => {
                                let failure =
                                    TxFailure::at_commit(&policy, extract, E::from(error));
                                let discard = failure.discards_connection();
                                (Err(failure), discard, false, true)
                            }
                        },
                        Err(error) => {
                            let failure = body(error);
                            // Always roll back before deciding: after MySQL 1205 the
                            // transaction is still open, with the statements before the
                            // timeout applied.
                            let rolled_back = tx.rollback().await.is_ok();
                            let discard = !rolled_back || failure.discards_connection();
                            (Err(failure), discard, false, false)
                        }
                    }
                }
            }
        };
        if commit_failed && !discard {
            // The failed Transaction queued a ROLLBACK, sent before the connection's next
            // command. When SQLite had ended the transaction itself (a full disk,
            // `RAISE(ROLLBACK)`, `INSERT OR ROLLBACK`) that ROLLBACK fails too, and sqlx
            // still counts the transaction open: every later BEGIN on the connection would
            // fail. Send it now, and close a connection still in a transaction.
            let conn = lease.conn();
            discard = conn.ping().await.is_err() || conn.is_in_transaction();
        }
        if begin_failed && locks_in_begin.is_some() && !discard {
            // The failed message may have left a failed transaction and session-level
            // locks behind (Postgres: a lock not granted in time).
            discard = DB::run_statement(lease.conn(), DB::LOCK_CLEANUP)
                .await
                .is_err();
        }
        lease.finish(cleanup, discard).await;
        result
    })
}
