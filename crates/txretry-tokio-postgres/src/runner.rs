//! The runner: a transaction on the caller's client, retried in place.

use futures_util::StreamExt;
use tokio_postgres::{Client, IsolationLevel, SimpleQueryMessage, Transaction};
use txretry_core::__private::{DatabaseLocks, database_locks, note_busy};
use txretry_core::{AsError, Isolation, RetryPolicy, RetryState, TxError, TxFailure, TxOptions};

use crate::{extract, reconnecting};

/// Runs `f` in a transaction on `client`, retrying the whole transaction when it fails for
/// a reason `policy` retries. The same as [`transaction_with`] with the default
/// [`TxOptions`]: the server's default isolation level, read-write.
///
/// ```no_run
/// use txretry_core::RetryPolicy;
///
/// # async fn demo(client: &mut tokio_postgres::Client) -> Result<(), Box<dyn std::error::Error>> {
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
pub fn transaction<'c, T, E, Via, F>(
    client: &'c mut Client,
    policy: &RetryPolicy,
    f: F,
) -> impl Future<Output = Result<T, TxError<E>>> + use<'c, T, E, Via, F>
where
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<tokio_postgres::Error> + AsError<Via>,
{
    run(client, policy.clone(), TxOptions::default(), f)
}

/// Runs `f` in a transaction begun with `options` on `client`, retrying the whole
/// transaction when it fails for a reason `policy` retries; returns `f`'s value once the
/// transaction commits, or the last error unchanged inside a [`TxError`] that also says
/// how the attempts went ([`TxError::outcome`]: verdict, phase, attempts).
///
/// Each attempt:
/// 1. begins with `client.build_transaction()`: the isolation level from `options` (mapped
///    to tokio-postgres's typed [`IsolationLevel`]), and `READ ONLY` when
///    [`TxOptions::is_read_only`]; otherwise the server's defaults;
/// 2. calls `f` with the transaction. `f` may run several times, so keep side effects
///    outside the database (sending mail, …) out of it, or make them idempotent;
/// 3. on `Ok`, commits — and returns `Ok` only if the transaction really committed (see
///    below). A COMMIT that fails is judged at the commit boundary: only the server's
///    "not committed" answers (a serialization failure of a `SERIALIZABLE` transaction, a
///    deadlock, a deferred constraint) keep their verdict; a lost connection or a
///    connection-class code there (a pooler answers a COMMIT that landed with `08P01`) is
///    [`Ambiguous`](txretry_core::Verdict::Ambiguous), never retried unless `options` are
///    [`idempotent`](TxOptions::idempotent). A session the client had already seen end
///    before the COMMIT went out (a switchover's shutdown of a primary whose sessions sat
///    idle in their transactions) is a failure before COMMIT: the server rolled it back;
/// 4. on `Err`, rolls back explicitly before deciding, then retries when the policy retries
///    the error's kind.
///
/// # Errors inside the closure
/// Propagate database errors out of `f` (with `?`): the runner can only retry what it
/// sees. A swallowed error (`let _ = tx.execute(…).await;`) leaves Postgres's transaction
/// aborted, and Postgres answers a plain `COMMIT` of an aborted transaction by rolling back
/// *without an error*. The runner therefore commits with `SELECT 1; COMMIT` in one round
/// trip: in an aborted transaction the `SELECT` fails with `25P02`
/// (`in_failed_sql_transaction`, "current transaction is aborted"), the `COMMIT` never
/// runs, and the runner rolls back and returns that error (permanent: the cause was
/// swallowed, so the runner cannot know it was transient).
///
/// # A broken connection ends the loop
/// The runner borrows the caller's client and has no way to open another. So it returns the
/// error at once, whatever the policy says, when
/// - the connection failed ([`TransientKind::Connection`](txretry_core::TransientKind::Connection),
///   or any failure the driver detected itself, such as an I/O error), the server is going
///   away or is a standby ([`TransientKind::Failover`](txretry_core::TransientKind::Failover)),
///   or [`Client::is_closed`] is true after the failure;
/// - or the `ROLLBACK` after an error failed: the session may still be inside the old
///   transaction, and beginning again on it would not start a fresh one.
///
/// The outcome then says so: its [`stop_reason`](txretry_core::Outcome::stop_reason) is
/// [`ConnectionUnusable`](txretry_core::StopReason::ConnectionUnusable). The client is
/// most likely closed (check [`Client::is_closed`]): drop it, connect again and call the
/// runner again. To ride out connection failures (and a switchover or failover)
/// automatically, use a [`Reconnecting`](crate::Reconnecting) client, which the runner reconnects, or take a
/// client from a pool
/// (deadpool-postgres, bb8-postgres) per call and let the pool replace closed clients.
///
/// This includes an ambiguous COMMIT on an [`idempotent`](TxOptions::idempotent) call: the
/// policy would retry it, but a lost answer to a COMMIT (a terminated backend, a pooler's
/// `FATAL 08P01`) closes the connection, so the runner stops after that attempt with the
/// verdict `Ambiguous` and `ConnectionUnusable`. Retrying an ambiguous commit on a fresh
/// connection needs a pooled runner (`txretry::sqlx`), or a new call on a new client by the
/// caller once it has checked whether the first one landed.
///
/// # Send
/// The returned future owns a clone of the policy and of the options and borrows only the
/// client and `f`: it is `Send` when `f`'s futures are, so it can be `tokio::spawn`ed with
/// an owned client. Let `f` own what it uses (`async move |tx| …` over copied, cloned or
/// `Arc` values); see the troubleshooting guide (`txretry::docs::troubleshooting`) for the error a borrowing
/// closure produces.
///
/// # Cancellation
/// If the returned future is dropped mid-attempt, tokio-postgres's `Transaction` queues a
/// `ROLLBACK` on the client as it is dropped.
///
/// # Admission across processes
/// Under a policy whose [`Admission`](txretry_core::Admission) is
/// [`in_database`](txretry_core::Admission::in_database), an attempt that names keys
/// ([`TxOptions::contends_on`]) takes one transaction-level advisory lock per key
/// (`pg_advisory_xact_lock` on [`KeyHash::to_i64`](txretry_core::KeyHash::to_i64), in key
/// order) right after BEGIN, in one more round trip (tokio-postgres sends BEGIN itself, so
/// the two cannot share one). It first tries them without waiting, in one statement
/// (`SELECT CASE WHEN pg_try_advisory_xact_lock(<key>) THEN … true … ELSE false END`);
/// when another session holds one, or a key was found held or collided within the last
/// second, it waits for them:
///
/// ```text
/// SELECT set_config('txretry.lock_timeout', current_setting('lock_timeout'), true);
/// SET LOCAL lock_timeout = '<wait>ms'; SELECT pg_advisory_xact_lock(<key>); …;
/// SELECT set_config('lock_timeout', current_setting('txretry.lock_timeout'), true)
/// ```
///
/// Your statements then run with the session's own `lock_timeout`. A lock not granted
/// within the wait fails the attempt with Postgres' own `55P03`
/// ([`LockTimeout`](txretry_core::TransientKind::LockTimeout)), rolled back and retried
/// under the policy. COMMIT, ROLLBACK (including the one a dropped attempt queues) and a
/// dead session release the locks. Under REPEATABLE READ and SERIALIZABLE the first of
/// these statements takes the transaction's snapshot before the wait, so an attempt that
/// waited for another transaction on the same rows fails with a serialization failure
/// (`40001`) and is retried: use READ COMMITTED there (with `SELECT … FOR UPDATE`), or
/// `txretry::sqlx`, which waits before BEGIN.
///
/// ```no_run
/// use txretry_core::{Isolation, RetryPolicy, TxOptions};
///
/// # async fn demo(client: &mut tokio_postgres::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let policy = RetryPolicy::builder().max_attempts(5).build()?;
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
pub fn transaction_with<'c, T, E, Via, F>(
    client: &'c mut Client,
    policy: &RetryPolicy,
    options: &TxOptions,
    f: F,
) -> impl Future<Output = Result<T, TxError<E>>> + use<'c, T, E, Via, F>
where
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<tokio_postgres::Error> + AsError<Via>,
{
    run(client, policy.clone(), options.clone(), f)
}

/// Where an attempt's client comes from: the caller's one client (a broken connection ends
/// the loop), or a [`Reconnecting`](crate::Reconnecting) client (a broken connection is
/// replaced).
pub(crate) trait Source: Send {
    /// The client for the next attempt; a failure to get one (to connect) fails the
    /// attempt. Not generic over the caller's error: a `+ Send` future whose bounds name
    /// `E: AsError<Via>` cannot be proven `Send` inside another `Send` future when `E` is a
    /// `BoxError` (rustc loses its `'static`), so the loop converts the error itself.
    fn client_for_attempt(
        &mut self,
    ) -> impl Future<Output = Result<&mut Client, tokio_postgres::Error>> + Send;

    /// The attempt failed and left the connection unusable for another (closed, or still
    /// inside the failed transaction): what the loop is told.
    fn lost<E>(&mut self, failure: TxFailure<E>) -> TxFailure<E>;

    /// The attempt committed.
    fn committed(&mut self) {}

    /// The attempt ended (committed or failed, either way): it was not dropped midway.
    fn ended(&mut self) {}
}

impl Source for &mut Client {
    async fn client_for_attempt(&mut self) -> Result<&mut Client, tokio_postgres::Error> {
        Ok(&mut **self)
    }

    fn lost<E>(&mut self, failure: TxFailure<E>) -> TxFailure<E> {
        // The caller's client: there is no other to run the next attempt on.
        failure.ends_retrying()
    }
}

/// A failed attempt, and whether it left the connection unusable.
type Failed<E> = (TxFailure<E>, bool);

/// The runner proper. It owns its policy and options, so its future borrows nothing of
/// the caller's but the client source and `f`.
pub(crate) async fn run<S, T, E, Via, F>(
    mut source: S,
    policy: RetryPolicy,
    options: TxOptions,
    mut f: F,
) -> Result<T, TxError<E>>
where
    S: Source,
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<tokio_postgres::Error> + AsError<Via>,
{
    let mut state = RetryState::new(&policy, &options);
    txretry_core::retry_async!(state, admission = &options, async {
        let client = source
            .client_for_attempt()
            .await
            .map_err(|e| reconnecting::connect_failed(&policy, e))?;
        let attempt: Result<T, Failed<E>> = async {
            // Database-backed admission: the keys' locks, if any (asked per attempt: with
            // `only_for_contended_keys` a collision turns them on).
            let locks = database_locks(&policy, &options);
            let level = options.get_isolation();
            let typed = level.and_then(typed_level);
            let mut tx = begin(client, typed, options.is_read_only())
                .await
                .map_err(|e| {
                    let closed = e.is_closed();
                    after_failure(&policy, &options, E::from(e), closed, true)
                })?;
            if let (Some(level), None) = (level, typed) {
                // A level this version of tokio-postgres has no typed option for: the
                // standard statement, from core's fixed strings, before anything else in
                // the transaction.
                let set = format!("SET TRANSACTION ISOLATION LEVEL {}", level.as_sql());
                if let Err(e) = tx.batch_execute(&set).await {
                    let rolled_back = tx.rollback().await.is_ok();
                    return Err(after_failure(
                        &policy,
                        &options,
                        E::from(e),
                        client.is_closed(),
                        rolled_back,
                    ));
                }
            }
            if let Some(locks) = &locks {
                // A lock not granted in time fails with Postgres' own 55P03. The locks are
                // the transaction's: its ROLLBACK (also the one a dropped `Transaction`
                // queues) or COMMIT releases them.
                if let Err(e) = take_locks(&tx, locks, &policy, &options).await {
                    let rolled_back = tx.rollback().await.is_ok();
                    return Err(after_failure(
                        &policy,
                        &options,
                        E::from(e),
                        client.is_closed(),
                        rolled_back,
                    ));
                }
            }
            match f(&mut tx).await {
                Ok(value) => match commit(tx).await {
                    Committed::Yes => Ok(value),
                    Committed::NotRun(e) => {
                        // The COMMIT never ran: the transaction is still open (a swallowed
                        // error, a timed-out `SELECT`) and is rolled back here, or the
                        // session is gone and the server rolled it back.
                        let closed = client.is_closed();
                        let rolled_back = !closed && client.batch_execute("ROLLBACK").await.is_ok();
                        Err(after_failure(
                            &policy,
                            &options,
                            E::from(e),
                            closed,
                            rolled_back,
                        ))
                    }
                    Committed::Failed(e) => {
                        let failure = TxFailure::at_commit(&policy, extract, E::from(e));
                        // The server already ended the transaction (or the session): this
                        // ROLLBACK only warns, or fails on a lost connection.
                        let cleaned =
                            !client.is_closed() && client.batch_execute("ROLLBACK").await.is_ok();
                        let unusable = !cleaned || failure.discards_connection();
                        Err((failure, unusable))
                    }
                },
                Err(e) => {
                    let rolled_back = tx.rollback().await.is_ok();
                    Err(after_failure(
                        &policy,
                        &options,
                        e,
                        client.is_closed(),
                        rolled_back,
                    ))
                }
            }
        }
        .await;
        source.ended();
        match attempt {
            Ok(value) => {
                source.committed();
                Ok(value)
            }
            Err((failure, true)) => Err(source.lost(failure)),
            Err((failure, false)) => Err(failure),
        }
    })
}

/// Takes an attempt's advisory locks inside its transaction: tried first without waiting,
/// in one statement, unless a key is busy; waited for, in one more round trip, when a key
/// is busy or the try found one held by another session (which marks the keys busy).
async fn take_locks(
    tx: &Transaction<'_>,
    locks: &DatabaseLocks<'_>,
    policy: &RetryPolicy,
    options: &TxOptions,
) -> Result<(), tokio_postgres::Error> {
    if locks.try_first() {
        let answer = tx
            .simple_query(&locks.postgres_try_in_transaction())
            .await?;
        let all_taken = answer.iter().any(
            |message| matches!(message, SimpleQueryMessage::Row(row) if row.get(0) == Some("t")),
        );
        if all_taken {
            return Ok(());
        }
        note_busy(policy, options);
    }
    tx.batch_execute(&locks.postgres_in_transaction()).await
}

/// How a COMMIT went.
enum Committed {
    Yes,
    /// The COMMIT never ran: the server failed the `SELECT` before it (`25P02` after a
    /// swallowed error, a statement timeout), or the query was never sent (the connection
    /// had already closed). Judged as a failure before COMMIT.
    NotRun(tokio_postgres::Error),
    /// The COMMIT failed, or the answer was lost with nothing proving that the COMMIT did
    /// not run: for the commit boundary to judge.
    Failed(tokio_postgres::Error),
}

/// Commits with `SELECT 1; COMMIT` in one simple-query round trip. Postgres answers a
/// plain COMMIT of an aborted transaction with a ROLLBACK tag and no error, which
/// tokio-postgres reports as success; the `SELECT` fails first instead, with `25P02`, and
/// the rest of the query string is skipped.
///
/// The answer is read message by message because where a failure comes decides what it
/// means. Two failures prove that the COMMIT never ran:
/// - the query was refused before it was sent: the client had already seen its session end
///   (a switchover's fast shutdown of a primary whose sessions sat idle in their
///   transactions);
/// - an `ERROR` (not `FATAL`) came before the `SELECT`'s answer: Postgres runs the two
///   statements in order and skips the rest of the string after an error, and the session
///   goes on, so the error was the `SELECT`'s.
///
/// A `FATAL` or a lost connection proves nothing: a pooler answers a COMMIT that landed with
/// its own `FATAL` when its server link breaks (PgBouncer's `08P01`), and both of the
/// server's answers leave in one flush.
async fn commit(tx: Transaction<'_>) -> Committed {
    let sent = tx.client().simple_query_raw("SELECT 1; COMMIT").await;
    // The transaction is over on the server (committed, or failed at COMMIT), or the caller
    // rolls it back: either way its drop must not queue a ROLLBACK of its own, which would
    // only draw a "there is no transaction in progress" warning. Top-level transactions
    // own no heap data, so forgetting one leaks nothing.
    std::mem::forget(tx);
    let answer = match sent {
        Ok(answer) => answer,
        // Refused before it was sent: the connection had already closed.
        Err(e) => return Committed::NotRun(e),
    };
    let mut answer = std::pin::pin!(answer);
    let mut select_answered = false;
    loop {
        match answer.next().await {
            None => return Committed::Yes,
            Some(Ok(SimpleQueryMessage::CommandComplete(_))) => select_answered = true,
            Some(Ok(_)) => {}
            Some(Err(e)) if !select_answered && is_error_severity(&e) => {
                return Committed::NotRun(e);
            }
            Some(Err(e)) => return Committed::Failed(e),
        }
    }
}

/// An `ERROR` from the server: the statement failed and the session goes on.
fn is_error_severity(e: &tokio_postgres::Error) -> bool {
    e.as_db_error()
        .is_some_and(|db| db.parsed_severity() == Some(tokio_postgres::error::Severity::Error))
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

/// Judges a failure before COMMIT, and whether it left the client unusable for another
/// attempt (closed, not rolled back, or a broken connection by the driver's own codes).
fn after_failure<E, Via>(
    policy: &RetryPolicy,
    options: &TxOptions,
    error: E,
    closed: bool,
    rolled_back: bool,
) -> Failed<E>
where
    E: AsError<Via>,
{
    let failure = TxFailure::in_body(policy, extract, error).under(options);
    let unusable = closed || !rolled_back || failure.discards_connection();
    (failure, unusable)
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
    use crate::extract;
    use std::io;
    use txretry_core::{TransientKind, Verdict};

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
        let failure = TxFailure::in_body(&RetryPolicy::default(), extract, err).ends_retrying();
        assert_eq!(
            failure.classification().verdict,
            Verdict::Transient(TransientKind::Connection)
        );
        let policy = RetryPolicy::builder()
            .retry_on(txretry_core::KindSet::ALL)
            .build()
            .unwrap();
        let options = TxOptions::new().idempotent(true);
        let mut state = txretry_core::RetryState::new(&policy, &options);
        assert_eq!(
            state.after_failure(&failure),
            txretry_core::Decision::Stop(txretry_core::StopReason::ConnectionUnusable)
        );
    }
}
