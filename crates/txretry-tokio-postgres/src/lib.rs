#![doc = r#"
txretry adapter for [tokio-postgres](https://docs.rs/tokio-postgres) 0.7: reads its typed
error codes and runs a closure in a transaction that is retried, in place, when Postgres
says the failure was transient (40P01 deadlock, 40001 serialization failure, 55P03 lock
timeout).

Most users reach this crate through the `txretry` facade with the `tokio-postgres` feature,
as `txretry::tokio_postgres`.

# Error codes
Linking this crate registers an extractor with the default classifier, so
`RetryPolicy::default()` and `txretry::classify` recognise tokio-postgres errors with no
setup. `tokio_postgres::Error`'s `Display` is only `"db error"`; the code lives on the
[`DbError`](tokio_postgres::error::DbError) behind it, which [`extract`] reads:

| error | code |
|---|---|
| `tokio_postgres::Error` with [`code()`](tokio_postgres::Error::code) | `Code::SqlState(..)` |
| `tokio_postgres::error::DbError` (a link of a chain) | `Code::SqlState(..)` |
| `tokio_postgres::Error` with [`is_closed()`](tokio_postgres::Error::is_closed) | `Code::Driver("connection closed")` |
| `tokio_postgres::Error` caused by a connection-breaking `std::io::Error` | `Code::Driver("io")` |

# Runner
[`transaction`] / [`transaction_with`] take the caller's `&mut Client`. tokio-postgres has
no pool, so the runner cannot replace a broken connection: after a connection failure it
returns the error at once, whatever the policy says (see [`transaction_with`]).

```no_run
use tokio_postgres::NoTls;
use txretry_core::RetryPolicy;

# async fn demo() -> Result<(), tokio_postgres::Error> {
let (mut client, connection) =
    tokio_postgres::connect("postgres://postgres@127.0.0.1/test", NoTls).await?;
tokio::spawn(connection); // tokio-postgres needs its connection future polled

let policy = RetryPolicy::default();
let moved: u64 = txretry_tokio_postgres::transaction(&mut client, &policy, async |tx| {
    tx.execute("UPDATE accounts SET balance = balance - 10 WHERE id = 1", &[]).await?;
    tx.execute("UPDATE accounts SET balance = balance + 10 WHERE id = 2", &[]).await
})
.await?;
# let _ = moved;
# Ok(())
# }
```
"#]

use std::error::Error as StdError;

use tokio_postgres::error::DbError;
use tokio_postgres::{Client, IsolationLevel, Transaction};
use txretry_core::{AsError, Code, Isolation, RetryPolicy, SqlState, TxFailure, TxOptions};

/// Reads the typed code from one tokio-postgres error value; the default classifier calls it
/// for each link of an error's chain. Use it when you write your own classifier closure.
///
/// Returns `None` for types other than `tokio_postgres::Error` and
/// `tokio_postgres::error::DbError`, and for tokio-postgres errors that carry no code
/// (a parameter that failed to serialize, a row that failed to decode, …).
///
/// ```
/// let err = std::io::Error::other("not a tokio-postgres error");
/// assert_eq!(txretry_tokio_postgres::extract(&err), None);
/// ```
pub fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
    if let Some(e) = error.downcast_ref::<tokio_postgres::Error>() {
        if let Some(state) = e.code() {
            return SqlState::new(state.code()).map(Code::SqlState);
        }
        if e.is_closed() {
            return Some(Code::Driver("connection closed"));
        }
        // Core's io extractor sees the `std::io::Error` when it is the next link; reading it
        // here too keeps a wrapped `tokio_postgres::Error` (`MyError::Db(e)`) classified at
        // the default depth.
        return e
            .source()
            .and_then(|source| source.downcast_ref::<std::io::Error>())
            .and_then(txretry_core::io_code);
    }
    if let Some(db) = error.downcast_ref::<DbError>() {
        return SqlState::new(db.code().code()).map(Code::SqlState);
    }
    None
}

txretry_core::register_extractor!(TOKIO_POSTGRES = extract);

/// Runs `f` in a transaction on `client`, retrying the whole transaction when it fails for
/// a reason `policy` retries. The same as [`transaction_with`] with the default
/// [`TxOptions`]: the server's default isolation level, read-write.
///
/// ```no_run
/// use txretry_core::RetryPolicy;
///
/// # async fn demo(client: &mut tokio_postgres::Client) -> Result<(), tokio_postgres::Error> {
/// let policy = RetryPolicy::default();
/// let balance: i64 = txretry_tokio_postgres::transaction(client, &policy, async |tx| {
///     tx.execute("UPDATE accounts SET balance = balance - 10 WHERE id = $1", &[&1_i32]).await?;
///     let row = tx.query_one("SELECT balance FROM accounts WHERE id = $1", &[&1_i32]).await?;
///     Ok::<_, tokio_postgres::Error>(row.get(0))
/// })
/// .await?;
/// # let _ = balance;
/// # Ok(())
/// # }
/// ```
pub async fn transaction<T, E, V, F>(
    client: &mut Client,
    policy: &RetryPolicy,
    f: F,
) -> Result<T, E>
where
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<tokio_postgres::Error> + AsError<V>,
{
    transaction_with(client, policy, &TxOptions::default(), f).await
}

/// Runs `f` in a transaction begun with `options` on `client`, retrying the whole
/// transaction when it fails for a reason `policy` retries; returns `f`'s value once the
/// transaction commits, or the last error unchanged.
///
/// Each attempt:
/// 1. begins with `client.build_transaction()`: the isolation level from `options` (mapped
///    to tokio-postgres's typed [`IsolationLevel`]), and `READ ONLY` when
///    [`TxOptions::is_read_only`]; otherwise the server's defaults;
/// 2. calls `f` with the transaction. `f` may run several times, so keep side effects
///    outside the database (sending mail, …) out of it, or make them idempotent;
/// 3. on `Ok`, commits. A failed `COMMIT` is judged with
///    [`TxFailure::at_commit`]: unless the server answered with a code (Postgres reports
///    serialization failures of `SERIALIZABLE` transactions at commit), nobody knows whether
///    it landed, and the verdict is ambiguous — never retried unless the policy is
///    [`idempotent`](txretry_core::RetryPolicyBuilder::idempotent);
/// 4. on `Err`, rolls back explicitly before deciding, then retries when the policy retries
///    the error's kind.
///
/// # A broken connection ends the loop
/// The runner borrows the caller's client and has no way to open another. So it returns the
/// error at once, whatever the policy says, when
/// - the connection failed ([`TransientKind::Connection`](txretry_core::TransientKind::Connection),
///   or any failure the driver detected itself, such as an I/O error), or
///   [`Client::is_closed`] is true after the failure;
/// - or the `ROLLBACK` after an error failed: the session may still be inside the old
///   transaction, and beginning again on it would not start a fresh one.
///
/// The client is then most likely closed (check [`Client::is_closed`]): drop it, connect
/// again and call the runner again. To ride out connection failures automatically, take a
/// client from a pool (deadpool-postgres, bb8-postgres) per call and let the pool replace
/// closed clients.
///
/// # Errors inside the closure
/// Propagate database errors out of `f` (with `?`): the runner can only roll back and retry
/// what it sees. A swallowed error leaves Postgres's transaction aborted, and Postgres
/// answers the `COMMIT` of an aborted transaction by rolling back without an error, which
/// tokio-postgres reports as success.
///
/// # Send
/// The returned future is `Send` when `f`'s futures are, so it can be `tokio::spawn`ed. Let
/// `f` own what it uses (`async move |tx| …` over cloned or `Arc` values): a closure that
/// borrows from the spawning function cannot be `'static`, and rustc sometimes fails to
/// prove `Send` for futures that hold such borrows across an await
/// (rust-lang/rust#100013).
///
/// # Cancellation
/// If the returned future is dropped mid-attempt, tokio-postgres's `Transaction` queues a
/// `ROLLBACK` on the client as it is dropped.
///
/// ```no_run
/// use txretry_core::{Isolation, RetryPolicy, TxOptions};
///
/// # async fn demo(client: &mut tokio_postgres::Client) -> Result<(), tokio_postgres::Error> {
/// let policy = RetryPolicy::builder().max_attempts(5).build().expect("valid policy");
/// let options = TxOptions::new().isolation(Isolation::Serializable);
/// txretry_tokio_postgres::transaction_with(client, &policy, &options, async |tx| {
///     let total: i64 = tx.query_one("SELECT sum(balance)::bigint FROM accounts", &[]).await?.get(0);
///     tx.execute("INSERT INTO audit (total) VALUES ($1)", &[&total]).await?;
///     Ok::<_, tokio_postgres::Error>(())
/// })
/// .await?;
/// # Ok(())
/// # }
/// ```
pub async fn transaction_with<T, E, V, F>(
    client: &mut Client,
    policy: &RetryPolicy,
    options: &TxOptions,
    mut f: F,
) -> Result<T, E>
where
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<tokio_postgres::Error> + AsError<V>,
{
    txretry_core::retry_async!(policy, options = options, async {
        let level = options.get_isolation();
        let typed = level.and_then(typed_level);
        let mut tx = begin(client, typed, options.is_read_only())
            .await
            .map_err(|e| {
                let closed = e.is_closed();
                after_failure(policy, E::from(e), closed, true)
            })?;
        if let (Some(level), None) = (level, typed) {
            // A level this version of tokio-postgres has no typed option for: the standard
            // statement, from core's fixed strings, before anything else in the transaction.
            let set = format!("SET TRANSACTION ISOLATION LEVEL {}", level.as_sql());
            if let Err(e) = tx.batch_execute(&set).await {
                let rolled_back = tx.rollback().await.is_ok();
                return Err(after_failure(
                    policy,
                    E::from(e),
                    client.is_closed(),
                    rolled_back,
                ));
            }
        }
        match f(&mut tx).await {
            Ok(value) => match tx.commit().await {
                Ok(()) => Ok(value),
                Err(e) => {
                    let failure = TxFailure::at_commit(policy, E::from(e));
                    if client.is_closed() || failure.discards_connection() {
                        Err(failure.ends_retrying())
                    } else {
                        Err(failure)
                    }
                }
            },
            Err(e) => {
                let rolled_back = tx.rollback().await.is_ok();
                Err(after_failure(policy, e, client.is_closed(), rolled_back))
            }
        }
    })
}

/// Begins a transaction with tokio-postgres's typed options.
async fn begin(
    client: &mut Client,
    level: Option<IsolationLevel>,
    read_only: bool,
) -> Result<Transaction<'_>, tokio_postgres::Error> {
    let mut builder = client.build_transaction();
    if let Some(level) = level {
        builder = builder.isolation_level(level);
    }
    if read_only {
        builder = builder.read_only(true);
    }
    builder.start().await
}

/// Judges a failure before COMMIT; a failure that leaves the client unusable for another
/// attempt ends the loop.
fn after_failure<E, V>(
    policy: &RetryPolicy,
    error: E,
    closed: bool,
    rolled_back: bool,
) -> TxFailure<E>
where
    E: AsError<V>,
{
    let failure = TxFailure::in_body(policy, error);
    if closed || !rolled_back || failure.discards_connection() {
        failure.ends_retrying()
    } else {
        failure
    }
}

/// tokio-postgres's typed level for core's, when it has one.
fn typed_level(level: Isolation) -> Option<IsolationLevel> {
    match level {
        Isolation::ReadUncommitted => Some(IsolationLevel::ReadUncommitted),
        Isolation::ReadCommitted => Some(IsolationLevel::ReadCommitted),
        Isolation::RepeatableRead => Some(IsolationLevel::RepeatableRead),
        Isolation::Serializable => Some(IsolationLevel::Serializable),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use txretry_core::{TransientKind, Verdict};

    #[test]
    fn other_error_types_have_no_code() {
        assert_eq!(extract(&io::Error::other("deadlock")), None);
        assert_eq!(extract(&std::fmt::Error), None);
    }

    #[test]
    fn every_core_isolation_level_has_a_typed_one() {
        for level in [
            Isolation::ReadUncommitted,
            Isolation::ReadCommitted,
            Isolation::RepeatableRead,
            Isolation::Serializable,
        ] {
            assert!(typed_level(level).is_some(), "{level:?}");
        }
    }

    #[test]
    fn a_failure_that_ends_retrying_is_never_retried() {
        let err = io::Error::from(io::ErrorKind::ConnectionReset);
        let failure = TxFailure::in_body(&RetryPolicy::default(), err).ends_retrying();
        assert_eq!(
            failure.classification().verdict,
            Verdict::Transient(TransientKind::Connection)
        );
        let policy = RetryPolicy::builder()
            .retry_on(txretry_core::KindSet::ALL)
            .idempotent(true)
            .build()
            .unwrap();
        let mut state = txretry_core::RetryState::new(&policy);
        assert_eq!(state.after_failure(&failure), None);
    }
}
