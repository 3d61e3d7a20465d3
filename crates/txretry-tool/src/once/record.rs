//! What every driver's `once` transaction decides the same way: what a claimed record says
//! (run the work, or replay), the output as it is recorded and returned, which errors of
//! the work are recorded as business errors, `prune`'s age binds; and how every driver's
//! call begins (`Call`), runs its transaction until the table exists (`with_table!`) and,
//! on the async drivers, hands the handler's closure to each attempt (`slot_attempt!`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use txretry_core::{AsError, RetryPolicy, TxOptions, Verdict};

use super::{BusinessError, Dialect, OnceError, OnceRefused, OnceRun, Statements};
use crate::ToolContext;

/// The savepoint the handler's work runs under, so that a business error can undo that
/// work and still commit its record.
pub(crate) const SAVEPOINT: &str = "SAVEPOINT txretry_once";
pub(crate) const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT txretry_once";

/// How many times a key is claimed when its record vanishes (is pruned) between the claim
/// and the read.
pub(crate) const CLAIMS: usize = 3;

/// The oldest age `prune` deletes by: Postgres caps interval arithmetic; no record is that
/// old anyway (about 317 years).
const MAX_AGE_SECS: f64 = 1e10;

/// `prune`'s bind on Postgres: the age in seconds (capped at [`MAX_AGE_SECS`]).
#[cfg_attr(
    not(any(feature = "sqlx-postgres", feature = "tokio-postgres")),
    allow(dead_code)
)]
pub(crate) fn age_seconds(older_than: Duration) -> f64 {
    older_than.as_secs_f64().min(MAX_AGE_SECS)
}

/// `prune`'s bind on MySQL/MariaDB: the age in whole microseconds (capped at
/// [`MAX_AGE_SECS`], so it fits an `i64`).
#[cfg_attr(
    not(any(feature = "sqlx-mysql", feature = "mysql_async")),
    allow(dead_code)
)]
pub(crate) fn age_micros(older_than: Duration) -> i64 {
    (older_than.as_secs_f64().min(MAX_AGE_SECS) * 1e6) as i64
}

/// `prune`'s bind on SQLite: a `strftime` modifier, `-N seconds` (capped at
/// [`MAX_AGE_SECS`]).
#[cfg_attr(
    not(any(feature = "sqlx-sqlite", feature = "rusqlite")),
    allow(dead_code)
)]
pub(crate) fn age_modifier(older_than: Duration) -> String {
    format!("-{:.6} seconds", older_than.as_secs_f64().min(MAX_AGE_SECS))
}

/// What the transaction committed: the work's output or business error, recorded now; or
/// an earlier call's, read back from its record (the work did not run).
pub(crate) enum Done<T> {
    Output(T),
    Business(BusinessError),
    Replayed(Result<T, BusinessError>),
}

/// A claimed record's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// This transaction's own claim: run the work.
    Pending,
    Ok,
    Error,
}

impl Status {
    /// The `status` column's value; an error names an unknown one.
    pub(crate) fn parse(status: &str) -> Result<Status, String> {
        match status {
            "pending" => Ok(Status::Pending),
            "ok" => Ok(Status::Ok),
            "error" => Ok(Status::Error),
            other => Err(format!(
                "a recorded tool call has the unknown status {other:?}"
            )),
        }
    }
}

/// A recorded output, as every repeated call gets it.
pub(crate) fn decode_output<T: DeserializeOwned>(output: &str) -> serde_json::Result<T> {
    serde_json::from_str(output)
}

/// The claimed record's decision: `None` when the claim is this transaction's own (run the
/// work), else what to return without running it. `output` is the decoded `output` column
/// of an `ok` record (read only then).
pub(crate) fn replay<T, X>(
    status: Status,
    output: impl FnOnce() -> Result<T, X>,
    kind: Option<String>,
    message: Option<String>,
) -> Result<Option<Done<T>>, X> {
    match status {
        Status::Pending => Ok(None),
        Status::Ok => output().map(|value| Some(Done::Replayed(Ok(value)))),
        Status::Error => Ok(Some(Done::Replayed(Err(BusinessError::new(
            kind.unwrap_or_default(),
            message.unwrap_or_default(),
        ))))),
    }
}

/// The work's value as it is recorded (JSON), and the value returned: the one read back
/// from that JSON, what every repeated call gets too.
pub(crate) fn encode_output<T: Serialize + DeserializeOwned>(
    value: &T,
) -> serde_json::Result<(String, T)> {
    let json = serde_json::to_string(value)?;
    let value = serde_json::from_str(&json)?;
    Ok((json, value))
}

/// The business error the work's `error` is recorded as, when the policy judges it
/// permanent; `None` when it is transient or ambiguous (the runner rolls everything back
/// and decides; nothing is recorded). A NUL in its kind or message (text an agent sent,
/// echoed) is recorded, and answered, as U+FFFD: Postgres refuses NUL in text, which left
/// the error unrecorded there and the call run again at every repeat.
pub(crate) fn business<E: AsError<Via>, Via>(
    policy: &RetryPolicy,
    error: &E,
) -> Option<BusinessError> {
    let judged = policy.classify(error.as_error());
    (judged.verdict == Verdict::Permanent)
        .then(|| BusinessError::from_error(error.as_error(), judged.code).without_nul())
}

/// What one `once` transaction needs, shared with each of its attempts.
pub(crate) struct Job {
    pub(crate) statements: Statements,
    pub(crate) tool: Arc<str>,
    pub(crate) key: Arc<str>,
    pub(crate) policy: RetryPolicy,
    /// The claim found no table.
    pub(crate) missing_table: AtomicBool,
}

/// What a `once_*` call takes from its context when it is called, for its transaction to
/// begin with when it runs: the futures own what they use.
pub(crate) struct Call {
    run: Option<Arc<OnceRun>>,
    tool: Arc<str>,
    policy: RetryPolicy,
    options: TxOptions,
}

impl Call {
    /// The call with `options`: always read-write, and idempotent (the record makes an
    /// ambiguous COMMIT safe to retry).
    pub(crate) fn new(ctx: &ToolContext, options: &TxOptions) -> Call {
        Call {
            run: ctx.once_run().cloned(),
            tool: ctx.tool().into(),
            policy: ctx.policy().clone(),
            options: options.clone().idempotent(true).read_only(false),
        }
    }

    /// The transaction's options.
    pub(crate) fn options(&self) -> &TxOptions {
        &self.options
    }

    /// Starts the run's one `once` transaction (refused when it may not start).
    pub(crate) fn begin<E>(
        &self,
        dialect: Dialect,
    ) -> Result<(Arc<OnceRun>, Arc<Job>), OnceError<E>> {
        let Some(run) = &self.run else {
            return Err(OnceError::Refused(OnceRefused::NotDeclared));
        };
        run.begin().map_err(OnceError::Refused)?;
        let job = Arc::new(Job {
            statements: run.once.statements(dialect).clone(),
            tool: Arc::clone(&self.tool),
            key: Arc::clone(&run.key),
            policy: self.policy.clone(),
            missing_table: AtomicBool::new(false),
        });
        Ok((Arc::clone(run), job))
    }
}

impl Job {
    /// Whether the runner's failure came from a claim that found no table (and the table
    /// was not created yet): then that failed claim is forgotten, the once layer's
    /// business and not the invocation's, and the caller creates the table and runs the
    /// transaction once more.
    pub(crate) fn missing_table(&self, table_created: bool, run: &OnceRun) -> bool {
        if table_created || !self.missing_table.swap(false, Ordering::AcqRel) {
            return false;
        }
        if let Some(scope) = self.policy.budget() {
            drop(scope.take_last_give_up());
            run.forget_missing_table_claim();
        }
        true
    }
}

/// Runs a driver's once transaction (`$transaction`: the runner's call, `.await`ed when
/// async) until it ends; when its claim found no table, creates it (`$migrate`, any error
/// that converts into a `BoxError`) and runs the transaction once more. Evaluates to
/// `Result<Done<T>, OnceError<E>>`.
///
/// A macro, like the runners' loops (`retry_async!`), so that each driver's future stays
/// `Send` (the handlers' futures must be) without going through async closures over
/// borrowed state, for which rustc cannot yet prove it (rust-lang/rust#100013); and so
/// that the blocking rusqlite call uses the same loop.
macro_rules! with_table {
    ($job:expr, $run:expr, transaction = $transaction:expr, migrate = $migrate:expr $(,)?) => {{
        let mut table_created = false;
        loop {
            match $transaction {
                Ok(done) => break Ok(done),
                Err(error) if $job.missing_table(table_created, $run) => {
                    drop(error);
                    if let Err(e) = $migrate {
                        break Err($crate::OnceError::Table(e.into()));
                    }
                    table_created = true;
                }
                Err(error) => break Err($crate::OnceError::Failed(error)),
            }
        }
    }};
}
pub(crate) use with_table;

/// The call's answer from what its transaction committed; tells the run how it ended.
pub(crate) fn finish<T, E>(run: &OnceRun, done: Done<T>) -> Result<T, OnceError<E>> {
    let (ended, replayed) = match done {
        Done::Output(value) => (Ok(value), false),
        Done::Business(business) => (Err(business), false),
        Done::Replayed(ended) => (ended, true),
    };
    run.ended(ended.is_err(), replayed);
    ended.map_err(OnceError::Business)
}

/// The runner's closure for one async driver: each attempt takes the handler's closure out
/// of `$slot`, runs `$attempt(tx, &mut f, &job)` and puts it back. Owns clones of the slot
/// and the job, so its future borrows nothing (and is `Send` when the handler's is).
#[cfg(async_once)]
macro_rules! slot_attempt {
    ($slot:expr, $job:expr, $attempt:ident) => {{
        let (job, slot) = (Arc::clone($job), Arc::clone($slot));
        async move |tx| {
            let mut f = slot.take();
            let result = $attempt(tx, &mut f, &job).await;
            slot.put(f);
            result
        }
    }};
}
#[cfg(async_once)]
pub(crate) use slot_attempt;

/// The handler's closure, handed to each runner attempt and taken back after it: the
/// runner's closure must own what it captures for its future to be `Send`. (The blocking
/// rusqlite runner takes a plain `FnMut` and needs none.)
#[cfg_attr(not(async_once), allow(dead_code))]
pub(crate) struct Slot<F>(Mutex<Option<F>>);

#[cfg_attr(not(async_once), allow(dead_code))]
impl<F> Slot<F> {
    pub(crate) fn new(f: F) -> Arc<Slot<F>> {
        Arc::new(Slot(Mutex::new(Some(f))))
    }

    /// The closure, for one attempt.
    pub(crate) fn take(&self) -> F {
        let taken = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        let Some(f) = taken else {
            unreachable!("a runner runs one attempt at a time");
        };
        f
    }

    /// The closure back, after the attempt.
    pub(crate) fn put(&self, f: F) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(f);
    }
}
