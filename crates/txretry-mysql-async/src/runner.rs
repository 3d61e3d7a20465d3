//! The runner: a transaction on a pooled connection, retried in place.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Error, IsolationLevel, Pool, ServerError, Transaction, TxOpts};
use txretry_core::__private::{DatabaseLocks, database_locks};
use txretry_core::{AsError, Isolation, RetryPolicy, RetryState, TxError, TxFailure, TxOptions};

use crate::extract;
use crate::lease::Lease;

/// Runs `f` in a transaction on a connection from `pool`, retrying the whole transaction
/// when it fails for a reason `policy` retries. The same as [`transaction_with`] with the
/// default [`TxOptions`]: the server's default isolation level, read-write.
///
/// ```no_run
/// use mysql_async::prelude::*;
/// use txretry_core::RetryPolicy;
///
/// # async fn demo(pool: &mysql_async::Pool) -> Result<(), Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::default();
/// let balance: Option<i64> = txretry_mysql_async::transaction(pool, &policy, async |tx| {
///     tx.exec_drop("UPDATE accounts SET balance = balance - 10 WHERE id = ?", (1,)).await?;
///     tx.exec_first("SELECT balance FROM accounts WHERE id = ?", (1,)).await
/// })
/// .await?;
/// # let _ = balance;
/// # Ok(())
/// # }
/// ```
pub fn transaction<T, E, Via, F>(
    pool: &Pool,
    policy: &RetryPolicy,
    f: F,
) -> impl Future<Output = Result<T, TxError<E>>> + use<T, E, Via, F>
where
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<Error> + AsError<Via>,
{
    run(pool.clone(), policy.clone(), TxOptions::default(), f)
}

/// Runs `f` in a transaction begun with `options` on a connection from `pool`, retrying the
/// whole transaction when it fails for a reason `policy` retries; returns `f`'s value once
/// the transaction commits, or the last error unchanged inside a [`TxError`] that also says
/// how the attempts went ([`TxError::outcome`]: verdict, phase, attempts).
///
/// Each attempt:
/// 1. takes a connection from `pool` and begins with
///    [`Conn::start_transaction`]: `SET TRANSACTION ISOLATION LEVEL …` from `options`,
///    `SET TRANSACTION READ ONLY` when [`TxOptions::is_read_only`], then
///    `START TRANSACTION`; otherwise the server's defaults;
/// 2. calls `f` with the transaction. `f` may run several times, so keep side effects
///    outside the database (sending mail, …) out of it, or make them idempotent;
/// 3. on `Ok`, commits. A failed `COMMIT` keeps its verdict only when the server said "not
///    committed" (Galera reports certification failures as 1213 at commit); a lost
///    connection or a connection-class error there (2006, 2013, relayed by a proxy after a
///    COMMIT that landed) is [`Ambiguous`](txretry_core::Verdict::Ambiguous), never retried
///    unless `options` are [`idempotent`](TxOptions::idempotent);
/// 4. on `Err`, sends `ROLLBACK` before deciding. This matters: after 1205 (lock-wait
///    timeout) MySQL and MariaDB roll back only the statement that timed out and keep the
///    transaction open, with everything it did before still applied.
///
/// # Connections
/// The connection goes back to the pool after a successful attempt and after a failure the
/// server reported. It is closed ([`Conn::disconnect`]) instead when `BEGIN` failed or was
/// cancelled (its session state is unknown), when the `ROLLBACK` failed, or when the
/// driver's error says the connection broke (a connection-class error, an I/O error;
/// judged from the error itself, whatever your classifier says). Connection failures are
/// recognised but retried only when the policy opts in (`retry_on`); each retry takes a new
/// connection from the pool.
///
/// # Errors inside the closure
/// Propagate database errors out of `f` (with `?`): the runner can only roll back and retry
/// what it sees. **A swallowed deadlock cannot be repaired by any runner**: after 1213 the
/// server has already rolled the whole transaction back, statements after it run on their
/// own (each committed at once), and the runner's `COMMIT` succeeds with only them applied.
///
/// # Send
/// The returned future owns clones of the pool handle, the policy and the options, so it
/// borrows nothing of the caller's but `f`: it is `Send` when `f`'s futures are. Let `f`
/// own what it uses (`async move |tx| …` over copied, cloned or `Arc` values); see the
/// troubleshooting guide (`txretry::docs::troubleshooting`) for the error a borrowing closure produces.
///
/// # Cancellation
/// If the returned future is dropped mid-attempt, the connection is closed (in the
/// background) rather than returned to the pool with a half-finished exchange. Its pool
/// slot is free at once; a statement the server was running goes on until it ends (a lock
/// wait: up to `innodb_lock_wait_timeout`), holding the transaction's locks, so under
/// repeated timeouts the server can hold more sessions than the pool's maximum. Bound
/// statements on every connection with `OptsBuilder::setup` (`SET SESSION
/// innodb_lock_wait_timeout = …`; not `init`, which the pool's reset undoes).
///
/// # Admission across processes
/// Under a policy whose [`Admission`](txretry_core::Admission) is
/// [`in_database`](txretry_core::Admission::in_database), an attempt that names keys
/// ([`TxOptions::contends_on`]) takes one named lock per key before `START TRANSACTION`,
/// in key order, all in one round trip: a `SELECT` of nested `CASE`s that calls
/// `GET_LOCK('txretry:<16 hex digits of the KeyHash>', <wait in whole seconds, rounded up>)`
/// for each key and stops at the first one not granted.
/// After COMMIT or ROLLBACK, on every path, it sends `DO RELEASE_ALL_LOCKS()` (one more
/// round trip) before the connection goes back to the pool; this releases every named lock
/// the session holds, including any the closure took. A connection whose locks could not
/// be released, or whose attempt was dropped after the first `GET_LOCK` was sent, is
/// closed instead (the server then drops its locks).
///
/// A lock not granted within the wait (`GET_LOCK` returned 0) fails the attempt with
/// `Error::Server(ServerError { code: 1205, state: "HY000", .. })`, built by the runner,
/// whose message starts with `txretry admission:` and names the lock: a
/// [`LockTimeout`](txretry_core::TransientKind::LockTimeout), retried under the policy. An
/// interrupted wait (`GET_LOCK` returned NULL, e.g. after `KILL QUERY`) fails it with code
/// 1317 ("Query execution was interrupted", SQLSTATE `70100`), permanent by default. Needs
/// MySQL ≥ 5.7 or MariaDB ≥ 10.0.2 (several named locks per session).
///
/// ```no_run
/// use mysql_async::prelude::*;
/// use txretry_core::{Isolation, RetryPolicy, TxOptions};
///
/// # async fn demo(pool: &mysql_async::Pool) -> Result<(), Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::builder().max_attempts(5).build()?;
/// let options = TxOptions::new().isolation(Isolation::ReadCommitted);
/// txretry_mysql_async::transaction_with(pool, &policy, &options, async |tx| {
///     tx.query_drop("INSERT INTO ledger (amount) VALUES (10)").await?;
///     tx.query_drop("UPDATE accounts SET balance = balance + 10 WHERE id = 1").await
/// })
/// .await?;
/// # Ok(())
/// # }
/// ```
pub fn transaction_with<T, E, Via, F>(
    pool: &Pool,
    policy: &RetryPolicy,
    options: &TxOptions,
    f: F,
) -> impl Future<Output = Result<T, TxError<E>>> + use<T, E, Via, F>
where
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<Error> + AsError<Via>,
{
    run(pool.clone(), policy.clone(), options.clone(), f)
}

/// The runner proper. It owns its pool handle, policy and options, so its future borrows
/// nothing of the caller's but `f`.
async fn run<T, E, Via, F>(
    pool: Pool,
    policy: RetryPolicy,
    options: TxOptions,
    mut f: F,
) -> Result<T, TxError<E>>
where
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<Error> + AsError<Via>,
{
    let (tx_opts, untyped_level) = tx_opts(&options);
    let mut state = RetryState::new(&policy, &options);
    txretry_core::retry_async!(state, admission = &options, async {
        // Database-backed admission: the named locks this attempt takes, if any (asked per
        // attempt: with `only_for_contended_keys` a collision turns them on).
        let locks = database_locks(&policy, &options);
        let conn = pool
            .get_conn()
            .await
            .map_err(|e| TxFailure::in_body(&policy, extract, E::from(e)))?;
        // Closed instead of pooled if this attempt is dropped before the session is known
        // clean (BEGIN in flight, a transaction left open, named locks held).
        let mut lease = Lease {
            conn: Some(conn),
            named_locks: false,
        };
        if let Some(locks) = &locks {
            // From the first GET_LOCK on, the session may hold named locks: the lease
            // releases them before it pools the connection, or closes it.
            lease.named_locks = true;
            if let Err(e) = take_locks(lease.conn(), locks).await {
                // No transaction is open: the session is clean but for the locks.
                return Err(failed(&policy, lease, E::from(e), true).await);
            }
        }
        let conn = lease.conn();
        if let Some(level) = untyped_level {
            // A level this version of mysql_async has no typed option for: the same
            // statement it would send, from core's fixed strings.
            let set = format!("SET TRANSACTION ISOLATION LEVEL {}", level.as_sql());
            if let Err(e) = conn.query_drop(set).await {
                return Err(failed(&policy, lease, E::from(e), false).await);
            }
        }
        // The transaction borrows the connection; the outcome is decided before the lease
        // is needed again (to return the connection to the pool or close it).
        let outcome = match conn.start_transaction(tx_opts.clone()).await {
            // The session state after a failed BEGIN (a pending SET TRANSACTION, a
            // half-read reply) is unknown: never pool it.
            Err(e) => Outcome::Failed {
                error: E::from(e),
                rolled_back: false,
            },
            Ok(mut tx) => match f(&mut tx).await {
                Ok(value) => match tx.commit().await {
                    Ok(()) => Outcome::Committed(value),
                    Err(e) => Outcome::CommitFailed(E::from(e)),
                },
                Err(error) => Outcome::Failed {
                    error,
                    rolled_back: tx.rollback().await.is_ok(),
                },
            },
        };
        match outcome {
            Outcome::Committed(value) => {
                lease.release().await;
                Ok(value)
            }
            Outcome::Failed { error, rolled_back } => {
                Err(failed(&policy, lease, error, rolled_back).await)
            }
            Outcome::CommitFailed(error) => {
                // mysql_async already tried a ROLLBACK; a connection it could not clean
                // goes back marked dirty, and the pool cleans or drops it.
                let failure = TxFailure::at_commit(&policy, extract, error);
                if failure.discards_connection() {
                    lease.discard().await;
                } else {
                    lease.release().await;
                }
                Err(failure)
            }
        }
    })
}

/// How one attempt ended, decided while the transaction still borrowed the connection.
enum Outcome<T, E> {
    Committed(T),
    /// BEGIN or the closure failed; whether the ROLLBACK after it succeeded.
    Failed {
        error: E,
        rolled_back: bool,
    },
    CommitFailed(E),
}

/// Judges a failure before COMMIT, and closes the connection instead of returning it to the
/// pool when its state is unknown.
async fn failed<E, Via>(
    policy: &RetryPolicy,
    lease: Lease,
    error: E,
    rolled_back: bool,
) -> TxFailure<E>
where
    E: AsError<Via>,
{
    let failure = TxFailure::in_body(policy, extract, error);
    if !rolled_back || failure.discards_connection() {
        lease.discard().await;
    } else {
        lease.release().await;
    }
    failure
}

/// Takes the named locks of database-backed admission, one `SELECT` for all the keys in
/// order (text protocol); stops at the first one not granted, with the server error a
/// statement would have failed with (1205 for 0, 1317 for NULL; see
/// [`transaction_with`]).
async fn take_locks(conn: &mut Conn, locks: &DatabaseLocks<'_>) -> Result<(), Error> {
    let answer: Option<Option<i64>> = conn.query_first(locks.mysql_get_locks()).await?;
    match locks.mysql_refused(answer.flatten()) {
        None => Ok(()),
        Some((key, granted)) => {
            let (code, state, message) = locks.mysql_refusal(key, granted);
            Err(Error::Server(ServerError {
                code,
                message,
                state: state.into(),
            }))
        }
    }
}

/// mysql_async's options for core's, and a level it has no typed option for.
fn tx_opts(options: &TxOptions) -> (TxOpts, Option<Isolation>) {
    let mut opts = TxOpts::new();
    let mut untyped = None;
    if let Some(level) = options.get_isolation() {
        match typed_level(level) {
            Some(typed) => {
                opts.with_isolation_level(typed);
            }
            None => untyped = Some(level),
        }
    }
    if options.is_read_only() {
        opts.with_readonly(true);
    }
    (opts, untyped)
}

/// mysql_async's typed level for core's, when it has one.
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

    #[test]
    fn options_map_to_typed_ones() {
        let (opts, untyped) = tx_opts(
            &TxOptions::new()
                .isolation(Isolation::Serializable)
                .read_only(true),
        );
        assert_eq!(opts.isolation_level(), Some(IsolationLevel::Serializable));
        assert_eq!(opts.readonly(), Some(true));
        assert_eq!(untyped, None);
        let (opts, _) = tx_opts(&TxOptions::new());
        assert_eq!(opts.isolation_level(), None);
        assert_eq!(opts.readonly(), None);
    }
}
