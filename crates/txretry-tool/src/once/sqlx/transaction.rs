//! The one transaction of a `once` call: claim the key, then replay the record or run the
//! work and record its outcome.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::{Pool, Transaction};
use txretry_core::{AsError, RetryPolicy, TxOptions};

use super::OnceBackend;
use crate::once::OnceError;
use crate::once::OnceRun;
use crate::once::record::{
    self, CLAIMS, Done, Job, ROLLBACK_TO_SAVEPOINT, SAVEPOINT, Slot, Status, business,
    encode_output, slot_attempt, with_table,
};

/// Runs the once transaction; when its claim finds no table, creates it and runs it once
/// more.
pub(super) async fn run_transaction<DB, T, E, Via, F>(
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
    E: From<sqlx::Error> + AsError<Via>,
{
    let slot = Slot::new(f);
    let once = &run.once;
    with_table!(
        job,
        run,
        transaction = txretry_sqlx::transaction_with(
            pool,
            policy,
            options,
            slot_attempt!(&slot, job, attempt)
        )
        .await,
        migrate = DB::migrate(pool, &once.statements(DB::DIALECT).ddl, once.table_name()).await,
    )
}

/// One attempt: claim, then replay or run `f` and record.
async fn attempt<DB, T, E, Via, F>(
    tx: &mut Transaction<'_, DB>,
    f: &mut F,
    job: &Job,
) -> Result<Done<T>, E>
where
    DB: OnceBackend,
    T: Serialize + DeserializeOwned,
    F: AsyncFnMut(&mut Transaction<'_, DB>) -> Result<T, E>,
    E: From<sqlx::Error> + AsError<Via>,
{
    let sql = &job.statements;
    let who: [&str; 2] = [&job.tool, &job.key];
    // A record deleted (pruned) between the claim and the read is claimed again.
    let mut claimed = None;
    for _ in 0..CLAIMS {
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
    let status = Status::parse(&status).map_err(|e| E::from(sqlx::Error::Decode(e.into())))?;
    let decode = || record::decode_output(&output.unwrap_or_default());
    if let Some(done) = record::replay(status, decode, kind, message)
        .map_err(|e| E::from(sqlx::Error::Decode(Box::new(e))))?
    {
        return Ok(done);
    }

    // The pending row is this transaction's own: run the work.
    DB::fixed(&mut **tx, SAVEPOINT).await?;
    match f(&mut *tx).await {
        Ok(value) => {
            // What every repeated call will get: the value read back from its record.
            let (json, value) =
                encode_output(&value).map_err(|e| E::from(sqlx::Error::Encode(Box::new(e))))?;
            DB::execute(&mut **tx, &sql.record_output, &[&json, &job.tool, &job.key]).await?;
            Ok(Done::Output(value))
        }
        Err(error) => {
            let Some(business) = business(&job.policy, &error) else {
                // Transient or ambiguous: the runner rolls everything back and decides.
                return Err(error);
            };
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
