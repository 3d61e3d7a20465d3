//! The one transaction of a `once` call on rusqlite: claim the key, then replay the record
//! or run the work and record its outcome. Blocking, like rusqlite.

use std::sync::atomic::Ordering;

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde::Serialize;
use serde::de::DeserializeOwned;
use txretry_core::{AsError, TxOptions};

use crate::once::record::{
    self, CLAIMS, Done, Job, ROLLBACK_TO_SAVEPOINT, SAVEPOINT, Status, business, encode_output,
    with_table,
};
use crate::once::{Dialect, Once, OnceError, OnceRun};

/// A record as it is read back: `status, output, error_kind, error_message`.
type Record = (String, Option<String>, Option<String>, Option<String>);

/// Runs the once transaction; when its claim finds no table, creates it and runs it once
/// more.
pub(super) fn run_transaction<T, E, Via, F>(
    conn: &mut Connection,
    options: &TxOptions,
    job: &Job,
    run: &OnceRun,
    mut f: F,
) -> Result<Done<T>, OnceError<E>>
where
    T: Serialize + DeserializeOwned,
    F: FnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<rusqlite::Error> + AsError<Via>,
{
    with_table!(
        job,
        run,
        transaction = txretry_rusqlite::transaction_with(conn, &job.policy, options, |tx| {
            attempt(tx, &mut f, job)
        }),
        migrate = migrate(conn, &run.once),
    )
}

/// Creates the table and its index if they do not exist, in one transaction.
pub(super) fn migrate(conn: &mut Connection, once: &Once) -> Result<(), rusqlite::Error> {
    let tx = conn.transaction()?;
    tx.execute_batch(&once.statements(Dialect::Sqlite).ddl)?;
    tx.commit()
}

/// One attempt: claim, then replay or run `f` and record.
fn attempt<T, E, Via, F>(tx: &mut Transaction<'_>, f: &mut F, job: &Job) -> Result<Done<T>, E>
where
    T: Serialize + DeserializeOwned,
    F: FnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<rusqlite::Error> + AsError<Via>,
{
    let sql = &job.statements;
    let (tool, key): (&str, &str) = (&job.tool, &job.key);
    // A record deleted (pruned) between the claim and the read is claimed again (only
    // another process can: the runner's `BEGIN IMMEDIATE` holds the write lock).
    let mut claimed = None;
    for _ in 0..CLAIMS {
        if let Err(error) = tx.execute(&sql.claim, params![tool, key]) {
            if is_missing_table(&error) {
                job.missing_table.store(true, Ordering::Release);
            }
            return Err(E::from(error));
        }
        claimed = tx
            .query_row(&sql.select, params![tool, key], |row| {
                Ok::<Record, _>((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })
            .optional()?;
        if claimed.is_some() {
            break;
        }
    }
    let Some((status, output, kind, message)) = claimed else {
        return Err(E::from(rusqlite::Error::QueryReturnedNoRows));
    };
    let status = Status::parse(&status).map_err(|e| E::from(decoding(e.into())))?;
    let decode = || record::decode_output(output.as_deref().unwrap_or_default());
    if let Some(done) =
        record::replay(status, decode, kind, message).map_err(|e| E::from(decoding(e.into())))?
    {
        return Ok(done);
    }

    // The pending row is this transaction's own: run the work.
    tx.execute_batch(SAVEPOINT)?;
    match f(tx) {
        Ok(value) => {
            // What every repeated call will get: the value read back from its record.
            let (json, value) = encode_output(&value)
                .map_err(|e| E::from(rusqlite::Error::ToSqlConversionFailure(e.into())))?;
            tx.execute(&sql.record_output, params![json, tool, key])?;
            Ok(Done::Output(value))
        }
        Err(error) => {
            let Some(business) = business(&job.policy, &error) else {
                // Transient: the runner rolls everything back and decides.
                return Err(error);
            };
            // Undo the work, keep the claim. If even that fails, that failure goes to the
            // runner: nothing is recorded, a retry runs again.
            tx.execute_batch(ROLLBACK_TO_SAVEPOINT)?;
            let (kind, message) = (business.kind(), business.message());
            tx.execute(&sql.record_error, params![kind, message, tool, key])?;
            Ok(Done::Business(business))
        }
    }
}

/// Whether `error` says the records' table does not exist (SQLite reports it as a plain
/// `SQLITE_ERROR` when the statement is prepared; only the message tells).
fn is_missing_table(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(_, Some(message))
        if message.starts_with("no such table"))
}

/// A record that cannot be read, as rusqlite's error.
fn decoding(error: Box<dyn std::error::Error + Send + Sync>) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, error)
}
