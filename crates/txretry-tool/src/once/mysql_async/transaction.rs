//! The one transaction of a `once` call on mysql_async: claim the key, then replay the
//! record or run the work and record its outcome.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use mysql_async::prelude::Queryable;
use mysql_async::{Pool, Row, Transaction};
use serde::Serialize;
use serde::de::DeserializeOwned;
use txretry_core::{AsError, TxOptions};

use crate::once::record::{
    self, CLAIMS, Done, Job, ROLLBACK_TO_SAVEPOINT, SAVEPOINT, Slot, Status, business,
    encode_output, slot_attempt, with_table,
};
use crate::once::{Dialect, Once, OnceError, OnceRun};

/// ER_NO_SUCH_TABLE.
const NO_SUCH_TABLE: u16 = 1146;

/// Runs the once transaction; when its claim finds no table, creates it and runs it once
/// more.
pub(super) async fn run_transaction<T, E, Via, F>(
    pool: &Pool,
    options: &TxOptions,
    job: &Arc<Job>,
    run: &OnceRun,
    f: F,
) -> Result<Done<T>, OnceError<E>>
where
    T: Serialize + DeserializeOwned,
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<mysql_async::Error> + AsError<Via>,
{
    let slot = Slot::new(f);
    with_table!(
        job,
        run,
        transaction = txretry_mysql_async::transaction_with(
            pool,
            &job.policy,
            options,
            slot_attempt!(&slot, job, attempt)
        )
        .await,
        migrate = migrate(pool, &run.once).await,
    )
}

/// Creates the table (its index is part of it) if it does not exist: one statement, which
/// MySQL and MariaDB commit on their own.
pub(super) async fn migrate(pool: &Pool, once: &Once) -> Result<(), mysql_async::Error> {
    let mut conn = pool.get_conn().await?;
    conn.query_drop(&*once.statements(Dialect::MySql).ddl).await
}

/// One attempt: claim, then replay or run `f` and record.
async fn attempt<T, E, Via, F>(tx: &mut Transaction<'_>, f: &mut F, job: &Job) -> Result<Done<T>, E>
where
    T: Serialize + DeserializeOwned,
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<mysql_async::Error> + AsError<Via>,
{
    let sql = &job.statements;
    let (tool, key): (&str, &str) = (&job.tool, &job.key);
    // A record deleted (pruned) between the claim and the read is claimed again.
    let mut claimed = None;
    for _ in 0..CLAIMS {
        if let Err(error) = tx.exec_drop(&*sql.claim, (tool, key)).await {
            if matches!(&error, mysql_async::Error::Server(e) if e.code == NO_SUCH_TABLE) {
                job.missing_table.store(true, Ordering::Release);
            }
            return Err(E::from(error));
        }
        claimed = tx
            .exec_first::<Row, _, _>(&*sql.select, (tool, key))
            .await?;
        if claimed.is_some() {
            break;
        }
    }
    let Some(row) = claimed else {
        return Err(E::from(other(
            "the claimed record vanished (pruned) three times",
        )));
    };
    if let Some(done) = replayed(row)? {
        return Ok(done);
    }

    // The pending row is this transaction's own: run the work.
    tx.query_drop(SAVEPOINT).await?;
    match f(&mut *tx).await {
        Ok(value) => {
            // What every repeated call will get: the value read back from its record.
            let (json, value) = encode_output(&value).map_err(|e| E::from(other(e)))?;
            tx.exec_drop(&*sql.record_output, (json, tool, key)).await?;
            Ok(Done::Output(value))
        }
        Err(error) => {
            let Some(business) = business(&job.policy, &error) else {
                // Transient or ambiguous: the runner rolls everything back and decides.
                return Err(error);
            };
            // Undo the work, keep the claim. If even that fails (the connection broke),
            // that failure goes to the runner: nothing is recorded, a retry runs again.
            tx.query_drop(ROLLBACK_TO_SAVEPOINT).await?;
            let (kind, message) = (business.kind(), business.message());
            tx.exec_drop(&*sql.record_error, (kind, message, tool, key))
                .await?;
            Ok(Done::Business(business))
        }
    }
}

/// The claimed row's decision (`status, output, error_kind, error_message`); a record that
/// cannot be read fails as a driver error (never a panic, as mysql_async's `FromRow` would).
fn replayed<T: DeserializeOwned>(mut row: Row) -> Result<Option<Done<T>>, mysql_async::Error> {
    let status: String = column(&mut row, 0)?;
    let status = Status::parse(&status).map_err(other)?;
    let output: Option<String> = column(&mut row, 1)?;
    let (kind, message) = (column(&mut row, 2)?, column(&mut row, 3)?);
    let decode = || record::decode_output(output.as_deref().unwrap_or_default()).map_err(other);
    record::replay(status, decode, kind, message)
}

/// Column `index` of a record, converted.
fn column<V: mysql_async::prelude::FromValue>(
    row: &mut Row,
    index: usize,
) -> Result<V, mysql_async::Error> {
    match row.take_opt(index) {
        Some(Ok(value)) => Ok(value),
        Some(Err(e)) => Err(other(e)),
        None => Err(other(format!("a record has no column {index}"))),
    }
}

/// A failure of the records' own encoding, as mysql_async's error.
fn other(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> mysql_async::Error {
    mysql_async::Error::Other(error.into())
}
