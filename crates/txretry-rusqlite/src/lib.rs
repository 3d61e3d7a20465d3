#![doc = r#"
The [rusqlite](https://docs.rs/rusqlite) adapter of txretry (blocking): it reads SQLite's
extended result codes out of `rusqlite::Error`, and runs a closure in a transaction that is
rolled back and run again when SQLite says the failure was transient (`SQLITE_BUSY` and its
extended codes, such as 517 `SQLITE_BUSY_SNAPSHOT`).

Use it through the facade, `txretry` with the `rusqlite` feature, as `txretry::rusqlite`.
With the feature on, `RetryPolicy::default()` recognises rusqlite's errors with no further
setup: [`extract`] is registered with the default classifier.

```
use txretry::{RetryPolicy, TxError};

# fn main() -> Result<(), rusqlite::Error> {
let mut conn = rusqlite::Connection::open_in_memory()?;
conn.execute_batch(
    "CREATE TABLE account (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
     INSERT INTO account VALUES (1, 100), (2, 0);",
)?;

let policy = RetryPolicy::default();
let moved = txretry::rusqlite::transaction(&mut conn, &policy, |tx| {
    let amount = 30;
    tx.execute("UPDATE account SET balance = balance - ?1 WHERE id = 1", [amount])?;
    tx.execute("UPDATE account SET balance = balance + ?1 WHERE id = 2", [amount])?;
    Ok::<_, rusqlite::Error>(amount)
});
// The runner's error is a `TxError<rusqlite::Error>`: the error `f` returned, with the
// outcome (verdict, phase, attempts). Here, in a function that returns rusqlite's error,
// take the error back out.
assert_eq!(moved.map_err(TxError::into_error)?, 30);

let to: i64 = conn.query_row("SELECT balance FROM account WHERE id = 2", [], |r| r.get(0))?;
assert_eq!(to, 30);
# Ok(())
# }
```

# What is retried
The adapter only extracts codes; the verdicts come from the core's table. By default the
extended codes with primary code 5 (`SQLITE_BUSY`: 5, 261, 517, 773) are retried;
primary code 6 (`SQLITE_LOCKED`) is recognised but retried only when the policy opts in;
everything else (a constraint, `SQLITE_READONLY`, `QueryReturnedNoRows`, your own errors)
is returned after one attempt.

`busy_timeout` and the runner complement each other: a busy timeout makes a connection
wait for a lock held by another writer, which is enough for `BEGIN IMMEDIATE`
transactions; it cannot help a `DEFERRED` transaction whose read snapshot went stale
(517 `SQLITE_BUSY_SNAPSHOT`) or two deferred readers that both want to write. Only rolling
back and running the whole transaction again does, and that is what the runner does.

# Build
This crate depends on rusqlite without choosing how SQLite is linked: enable rusqlite's
`bundled` feature (or link a system library) in your own dependency on rusqlite 0.39.
"#]

use std::error::Error;

use rusqlite::{Connection, Transaction, TransactionBehavior};
use txretry_core::{
    AsError, Code, RetryPolicy, RetryState, SqliteBegin, TxError, TxFailure, TxOptions,
};

/// Reads the SQLite extended result code from one error value: a
/// `rusqlite::Error::SqliteFailure` or a bare `rusqlite::ffi::Error` (the `source()` of
/// rusqlite errors that carry a code, such as `SqlInputError`). Anything else is `None`.
///
/// It is registered with the default classifier, so `txretry::classify` and
/// `RetryPolicy::default()` already use it; call it yourself from a custom classifier.
///
/// ```
/// use rusqlite::ffi;
/// use txretry::Code;
///
/// let busy = rusqlite::Error::SqliteFailure(ffi::Error::new(517), None);
/// assert_eq!(txretry::rusqlite::extract(&busy), Some(Code::Sqlite(517)));
/// assert_eq!(txretry::rusqlite::extract(&rusqlite::Error::QueryReturnedNoRows), None);
/// ```
pub fn extract(error: &(dyn Error + 'static)) -> Option<Code> {
    if let Some(error) = error.downcast_ref::<rusqlite::Error>() {
        return match error {
            rusqlite::Error::SqliteFailure(failure, _) => Some(Code::Sqlite(failure.extended_code)),
            _ => None,
        };
    }
    error
        .downcast_ref::<rusqlite::ffi::Error>()
        .map(|failure| Code::Sqlite(failure.extended_code))
}

txretry_core::register_extractor!(extract);

/// Runs `f` in a transaction on `conn` begun with `BEGIN IMMEDIATE`, committing when it
/// returns `Ok`; when an attempt fails with an error `policy` retries, rolls back, waits,
/// and runs `f` again in a fresh transaction. Blocking: waits with `std::thread::sleep`.
///
/// The same as [`transaction_with`] with [`TxOptions::default()`]; see there for what
/// happens on each kind of failure and to the connection.
///
/// `E` is whatever `f` returns: `rusqlite::Error`, your own error type with a
/// `From<rusqlite::Error>` impl, `anyhow::Error` or `Box<dyn Error + Send + Sync>`. The
/// last error is returned unchanged inside a [`TxError`], which also says how the call
/// went ([`TxError::outcome`]: the verdict, the phase, the attempts).
///
/// ```
/// use txretry::{Phase, RetryPolicy, Verdict};
///
/// #[derive(Debug, thiserror::Error)]
/// enum TransferError {
///     #[error("insufficient funds")]
///     InsufficientFunds,
///     #[error(transparent)]
///     Db(#[from] rusqlite::Error),
/// }
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut conn = rusqlite::Connection::open_in_memory()?;
/// conn.execute_batch(
///     "CREATE TABLE account (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
///      INSERT INTO account VALUES (1, 10), (2, 0);",
/// )?;
///
/// let policy = RetryPolicy::default();
/// let result = txretry::rusqlite::transaction(&mut conn, &policy, |tx| {
///     let balance: i64 = tx.query_row("SELECT balance FROM account WHERE id = 1", [], |r| r.get(0))?;
///     if balance < 50 {
///         return Err(TransferError::InsufficientFunds); // rolled back, returned once
///     }
///     tx.execute("UPDATE account SET balance = balance - 50 WHERE id = 1", [])?;
///     tx.execute("UPDATE account SET balance = balance + 50 WHERE id = 2", [])?;
///     Ok(())
/// });
/// let err = result.unwrap_err();
/// assert!(matches!(err.error(), TransferError::InsufficientFunds));
/// // Your own error is permanent: returned after one attempt, before COMMIT.
/// assert_eq!(err.outcome().verdict(), Verdict::Permanent);
/// assert_eq!(err.outcome().phase(), Phase::Body);
/// assert_eq!(err.outcome().attempts(), 1);
/// assert!(conn.is_autocommit()); // no transaction left open
/// # Ok(())
/// # }
/// ```
pub fn transaction<T, E, Via, F>(
    conn: &mut Connection,
    policy: &RetryPolicy,
    f: F,
) -> Result<T, TxError<E>>
where
    F: FnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<rusqlite::Error> + AsError<Via>,
{
    transaction_with(conn, policy, &TxOptions::default(), f)
}

/// [`transaction`] with options: how each attempt's transaction begins, and read-only.
///
/// # Options
/// - [`TxOptions::sqlite_begin`]: `BEGIN IMMEDIATE` by default (the write lock is taken up
///   front, so two writers queue on `busy_timeout`, or fail at `BEGIN` with `SQLITE_BUSY`,
///   instead of both reading and then failing to upgrade); `BEGIN DEFERRED` and
///   `BEGIN EXCLUSIVE` on request. These are rusqlite's fixed statements
///   ([`TransactionBehavior`]).
/// - [`TxOptions::read_only`]: `PRAGMA query_only = ON` for the transaction's duration, so
///   any write fails with `SQLITE_READONLY` (permanent, not retried). The pragma is put
///   back as it was after COMMIT or ROLLBACK, on error and when `f` panics too. A read-only
///   transaction always begins `DEFERRED`: it never takes the write lock (SQLite refuses
///   `BEGIN IMMEDIATE`/`EXCLUSIVE` under `query_only`).
/// - [`TxOptions::isolation`] is ignored: SQLite transactions are always serializable.
///
/// # Failures
/// - Any error from BEGIN, from `f` or from COMMIT ends the attempt. When a transaction is
///   still open, the runner rolls it back explicitly before deciding (SQLite leaves the
///   transaction open after, for example, `SQLITE_BUSY_SNAPSHOT` or a deferred constraint
///   failing at COMMIT).
/// - At COMMIT SQLite always answers with a result code, and a failed COMMIT that is then
///   rolled back did not commit: a `SQLITE_BUSY` at COMMIT is retried like any other, a
///   constraint checked at COMMIT (a deferred foreign key) is returned once. The outcome's
///   phase is [`Phase::Commit`](txretry_core::Phase::Commit); its verdict is never
///   ambiguous.
/// - SQLite can roll a transaction back on its own in the middle of it (a constraint
///   declared `ON CONFLICT ROLLBACK`, a trigger's `RAISE(ROLLBACK, …)`, and possibly
///   `SQLITE_FULL` or `SQLITE_IOERR`). If `f` swallows that error and returns `Ok`, the
///   runner's COMMIT fails with "cannot commit - no transaction is active" and the runner
///   returns that error (permanent, at commit): it never reports such a call as committed.
///   Statements `f` ran after the rollback, though, ran outside any transaction and were
///   committed one by one; propagate errors with `?`.
/// - The policy decides the rest; the last error is returned unchanged, in a [`TxError`].
///
/// # The connection
/// There is no pool and nothing is discarded: every attempt runs on `conn`, which the runner
/// borrows for the whole call and gives back with no transaction open and `query_only` as
/// it found it. One exception: if ROLLBACK itself fails and the transaction is still open
/// (not expected in practice: every statement of `f` has finished by then, and ROLLBACK
/// no longer fails on pending statements since SQLite 3.7.11), the runner stops at once and returns
/// the error of that attempt without retrying; `conn.is_autocommit()` is then `false` and
/// the caller decides (run `ROLLBACK`, or drop the connection, which rolls back on close).
///
/// Do not COMMIT or ROLLBACK inside `f`: return `Ok` to commit, `Err` to roll back. If `f`
/// panics, rusqlite's `Transaction` rolls back as it unwinds and the panic propagates.
///
/// # Threads
/// The runner blocks its thread, including while it waits between attempts. A
/// `rusqlite::Connection` is `Send`: open one per thread (SQLite serialises writers with
/// file locks), or from async code call the runner inside `tokio::task::spawn_blocking`
/// with a `move` closure that owns the connection.
///
/// ```
/// use std::time::Duration;
/// use txretry::{Backoff, Jitter, RetryPolicy, SqliteBegin, TxOptions};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut conn = rusqlite::Connection::open_in_memory()?;
/// conn.execute_batch("CREATE TABLE counter (n INTEGER NOT NULL); INSERT INTO counter VALUES (0);")?;
///
/// let policy = RetryPolicy::builder()
///     .max_attempts(20)
///     .backoff(Backoff::Exponential { initial: Duration::from_millis(2), factor: 2.0 })
///     .max_delay(Duration::from_millis(100))
///     .jitter(Jitter::Full)
///     .build()?;
///
/// // Read first, write later: DEFERRED, retried when the snapshot goes stale (517).
/// let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
/// txretry::rusqlite::transaction_with(&mut conn, &policy, &deferred, |tx| {
///     let n: i64 = tx.query_row("SELECT n FROM counter", [], |r| r.get(0))?;
///     tx.execute("UPDATE counter SET n = ?1", [n + 1])?;
///     Ok::<_, rusqlite::Error>(())
/// })?;
///
/// // A read-only transaction: writes fail with SQLITE_READONLY.
/// let read_only = TxOptions::new().read_only(true);
/// let n: i64 = txretry::rusqlite::transaction_with(&mut conn, &policy, &read_only, |tx| {
///     tx.query_row("SELECT n FROM counter", [], |r| r.get(0))
/// })?;
/// assert_eq!(n, 1);
/// # Ok(())
/// # }
/// ```
pub fn transaction_with<T, E, Via, F>(
    conn: &mut Connection,
    policy: &RetryPolicy,
    options: &TxOptions,
    mut f: F,
) -> Result<T, TxError<E>>
where
    F: FnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<rusqlite::Error> + AsError<Via>,
{
    // `&mut` guarantees no other transaction of ours is open on the connection; the
    // attempts then only need a shared borrow, which the `query_only` guard shares too.
    let conn: &Connection = conn;
    let mut state = RetryState::new(policy, options);
    txretry_core::retry_blocking!(state, attempt(conn, policy, options, &mut f))
}

/// One attempt: BEGIN, `f`, COMMIT; ROLLBACK on any error.
fn attempt<T, E, Via, F>(
    conn: &Connection,
    policy: &RetryPolicy,
    options: &TxOptions,
    f: &mut F,
) -> Result<T, TxFailure<E>>
where
    F: FnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<rusqlite::Error> + AsError<Via>,
{
    let begin_failed = |error: rusqlite::Error| TxFailure::in_body(policy, extract, E::from(error));

    // Declared before the transaction, so it is dropped (and `query_only` restored) after
    // the transaction has committed or rolled back, whichever way this function is left.
    let _query_only = if options.is_read_only() {
        QueryOnly::enable(conn).map_err(begin_failed)?
    } else {
        None
    };
    let mut tx = Transaction::new_unchecked(conn, behavior(options)).map_err(begin_failed)?;

    match f(&mut tx) {
        Ok(value) => match tx.commit() {
            Ok(()) => Ok(value),
            Err(error) => {
                // `commit` consumed the transaction; when the COMMIT failed and the
                // transaction stayed open, rusqlite's drop already tried a ROLLBACK.
                let failure = TxFailure::at_commit(policy, extract, E::from(error));
                Err(stop_if_still_open(conn, failure))
            }
        },
        Err(error) => {
            if !tx.is_autocommit() {
                // On failure the transaction's drop tries once more; checked below.
                let _ = tx.rollback();
            } else {
                drop(tx); // SQLite already rolled back on its own; nothing to do.
            }
            Err(stop_if_still_open(
                conn,
                TxFailure::in_body(policy, extract, error),
            ))
        }
    }
}

/// Makes sure no transaction is open on `conn`: one more ROLLBACK if one still is. When
/// the transaction is still open after that, another attempt would only fail at BEGIN, so
/// the failure ends the loop.
fn stop_if_still_open<E>(conn: &Connection, failure: TxFailure<E>) -> TxFailure<E> {
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    if conn.is_autocommit() {
        failure
    } else {
        failure.ends_retrying()
    }
}

/// rusqlite's fixed BEGIN statement for the options.
fn behavior(options: &TxOptions) -> TransactionBehavior {
    if options.is_read_only() {
        // `query_only` refuses the write lock IMMEDIATE and EXCLUSIVE take at BEGIN.
        return TransactionBehavior::Deferred;
    }
    match options.get_sqlite_begin() {
        SqliteBegin::Deferred => TransactionBehavior::Deferred,
        SqliteBegin::Immediate => TransactionBehavior::Immediate,
        SqliteBegin::Exclusive => TransactionBehavior::Exclusive,
    }
}

/// `PRAGMA query_only = ON` until dropped; then back to OFF.
struct QueryOnly<'c> {
    conn: &'c Connection,
}

impl<'c> QueryOnly<'c> {
    /// Turns `query_only` on, unless it already is (then there is nothing to restore).
    fn enable(conn: &'c Connection) -> rusqlite::Result<Option<Self>> {
        let already: bool = conn.pragma_query_value(None, "query_only", |row| row.get(0))?;
        if already {
            return Ok(None);
        }
        conn.execute_batch("PRAGMA query_only = ON")?;
        Ok(Some(QueryOnly { conn }))
    }
}

impl Drop for QueryOnly<'_> {
    fn drop(&mut self) {
        // Setting a flag pragma does not fail short of running out of memory; there is
        // nobody to report it to from a drop (and the transaction's outcome stands).
        let _ = self.conn.execute_batch("PRAGMA query_only = OFF");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::ffi;
    use txretry_core::{TransientKind, Verdict};

    fn failure(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(ffi::Error::new(code), Some("database is locked".into()))
    }

    #[test]
    fn sqlite_failure_yields_its_extended_code() {
        assert_eq!(extract(&failure(5)), Some(Code::Sqlite(5)));
        assert_eq!(extract(&failure(517)), Some(Code::Sqlite(517)));
        assert_eq!(extract(&failure(2067)), Some(Code::Sqlite(2067)));
    }

    #[test]
    fn a_bare_ffi_error_is_read_as_a_chain_link() {
        assert_eq!(extract(&ffi::Error::new(261)), Some(Code::Sqlite(261)));
    }

    #[test]
    fn rusqlite_errors_without_a_code_yield_none() {
        assert_eq!(extract(&rusqlite::Error::QueryReturnedNoRows), None);
        assert_eq!(extract(&rusqlite::Error::InvalidQuery), None);
        assert_eq!(extract(&std::io::Error::other("database is locked")), None);
    }

    #[test]
    fn the_default_classifier_knows_rusqlite_errors() {
        let c = txretry_core::classify(&failure(517));
        assert_eq!(c.verdict, Verdict::Transient(TransientKind::Busy));
        assert_eq!(c.code, Some(Code::Sqlite(517)));
        let c = txretry_core::classify(&failure(2067));
        assert_eq!(c.verdict, Verdict::Permanent);
        assert_eq!(c.code, Some(Code::Sqlite(2067)));
    }

    #[test]
    fn a_wrapped_rusqlite_error_is_found_one_level_down() {
        #[derive(Debug)]
        struct Wrapper(rusqlite::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("query failed")
            }
        }
        impl Error for Wrapper {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let c = txretry_core::classify(&Wrapper(failure(5)));
        assert_eq!(c.code, Some(Code::Sqlite(5)));
        assert_eq!(c.verdict, Verdict::Transient(TransientKind::Busy));
    }

    #[test]
    fn begin_behaviour_follows_the_options() {
        let is = |o: TxOptions, want: &str| {
            let got = match behavior(&o) {
                TransactionBehavior::Deferred => "DEFERRED",
                TransactionBehavior::Immediate => "IMMEDIATE",
                TransactionBehavior::Exclusive => "EXCLUSIVE",
                _ => "other",
            };
            assert_eq!(got, want, "{o:?}");
        };
        is(TxOptions::default(), "IMMEDIATE");
        is(
            TxOptions::new().sqlite_begin(SqliteBegin::Deferred),
            "DEFERRED",
        );
        is(
            TxOptions::new().sqlite_begin(SqliteBegin::Exclusive),
            "EXCLUSIVE",
        );
        is(TxOptions::new().read_only(true), "DEFERRED");
        is(
            TxOptions::new()
                .read_only(true)
                .sqlite_begin(SqliteBegin::Exclusive),
            "DEFERRED",
        );
    }
}
