//! The one transaction of a `once` call: claim the key, then replay the record or run the
//! work and record its outcome.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::{Pool, Transaction};
use txretry_core::{AsError, RetryPolicy, TxOptions, Verdict};

use super::{OnceBackend, OnceError};
use crate::BusinessError;
use crate::once::{OnceRun, Statements};

/// The savepoint the handler's work runs under, so that a business error can undo that
/// work and still commit its record.
const SAVEPOINT: &str = "SAVEPOINT txretry_once";
const ROLLBACK_TO_SAVEPOINT: &str = "ROLLBACK TO SAVEPOINT txretry_once";

/// What the transaction committed: the output (recorded now, or read back), or the
/// business error.
pub(super) enum Done<T> {
    Output(T),
    Business(BusinessError),
}

/// What one `once` transaction needs, shared with each of its attempts.
pub(super) struct Job {
    pub(super) statements: Statements,
    pub(super) tool: Arc<str>,
    pub(super) key: Arc<str>,
    pub(super) policy: RetryPolicy,
    /// The claim found no table.
    pub(super) missing_table: AtomicBool,
}

/// Runs the once transaction; when its claim finds no table, creates it and runs it once
/// more.
pub(super) async fn run_transaction<DB, T, E, V, F>(
    pool: &Pool<DB>,
    policy: &RetryPolicy,
    options: &TxOptions,
    job: &Arc<Job>,
    run: &OnceRun,
    f: F,
) -> Result<Done<T>, OnceError<E>>
where
    DB: OnceBackend,
    T: Serialize + DeserializeOwned,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<V>,
{
    // The closure is handed to each runner call, and taken back after (the runner's
    // closure must own what it captures for its future to be `Send`).
    let slot = Arc::new(Mutex::new(Some(f)));
    let mut table_created = false;
    loop {
        let (job_here, slot_here) = (Arc::clone(job), Arc::clone(&slot));
        let result = txretry_sqlx::transaction_with(pool, policy, options, async move |tx| {
            let taken = slot_here
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let Some(mut f) = taken else {
                unreachable!("a runner runs one attempt at a time");
            };
            let result = attempt(tx, &mut f, &job_here).await;
            *slot_here.lock().unwrap_or_else(PoisonError::into_inner) = Some(f);
            result
        })
        .await;
        match result {
            Ok(done) => return Ok(done),
            Err(error) if !table_created && job.missing_table.swap(false, Ordering::AcqRel) => {
                drop(error);
                // The failed claim is this layer's business, not the invocation's.
                if let Some(scope) = policy.scope() {
                    drop(scope.take_last_give_up());
                    run.forget_missing_table_claim();
                }
                let once = &run.once;
                DB::migrate(pool, &once.statements(DB::DIALECT).ddl, once.table_name())
                    .await
                    .map_err(OnceError::Table)?;
                table_created = true;
            }
            Err(error) => return Err(OnceError::Failed(error)),
        }
    }
}

/// One attempt: claim, then replay or run `f` and record.
async fn attempt<DB, T, E, V, F>(
    tx: &mut Transaction<'_, DB>,
    f: &mut F,
    job: &Job,
) -> Result<Done<T>, E>
where
    DB: OnceBackend,
    T: Serialize + DeserializeOwned,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<V>,
{
    let sql = &job.statements;
    let who: [&str; 2] = [&job.tool, &job.key];
    // A record deleted (pruned) between the claim and the read is claimed again.
    let mut claimed = None;
    for _ in 0..3 {
        if let Err(error) = DB::execute(&mut **tx, &sql.claim, &who).await {
            if DB::is_missing_table(&error) {
                job.missing_table.store(true, Ordering::Release);
            }
            return Err(E::from(error));
        }
        claimed = DB::fetch_record(&mut **tx, &sql.select, &who).await?;
        if claimed.is_some() {
            break;
        }
    }
    let Some((status, output, kind, message)) = claimed else {
        return Err(E::from(sqlx::Error::RowNotFound));
    };
    match status.as_str() {
        "pending" => {}
        "ok" => {
            let output = output.unwrap_or_default();
            return serde_json::from_str(&output)
                .map(Done::Output)
                .map_err(|e| E::from(sqlx::Error::Decode(Box::new(e))));
        }
        "error" => {
            return Ok(Done::Business(BusinessError::new(
                kind.unwrap_or_default(),
                message.unwrap_or_default(),
            )));
        }
        other => {
            return Err(E::from(sqlx::Error::Decode(
                format!("a recorded tool call has the unknown status {other:?}").into(),
            )));
        }
    }

    // The pending row is this transaction's own: run the work.
    DB::fixed(&mut **tx, SAVEPOINT).await?;
    match f(&mut *tx).await {
        Ok(value) => {
            let json = serde_json::to_string(&value)
                .map_err(|e| E::from(sqlx::Error::Encode(Box::new(e))))?;
            // What every repeated call will get: the value read back from its record.
            let value = serde_json::from_str(&json)
                .map_err(|e| E::from(sqlx::Error::Decode(Box::new(e))))?;
            DB::execute(&mut **tx, &sql.record_output, &[&json, &job.tool, &job.key]).await?;
            Ok(Done::Output(value))
        }
        Err(error) => {
            let judged = job.policy.classify(error.as_error());
            if judged.verdict != Verdict::Permanent {
                // Transient or ambiguous: the runner rolls everything back and decides.
                return Err(error);
            }
            let business = BusinessError::from_error(error.as_error(), judged.code);
            // Undo the work, keep the claim. If even that fails (the connection broke),
            // that failure goes to the runner: nothing is recorded, a retry runs again.
            DB::fixed(&mut **tx, ROLLBACK_TO_SAVEPOINT).await?;
            DB::execute(
                &mut **tx,
                &sql.record_error,
                &[business.kind(), business.message(), &job.tool, &job.key],
            )
            .await?;
            Ok(Done::Business(business))
        }
    }
}
