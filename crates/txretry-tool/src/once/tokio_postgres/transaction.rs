//! The one transaction of a `once` call on tokio-postgres: claim the key, then replay the
//! record or run the work and record its outcome.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::BytesMut;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Row, Transaction};
use txretry_core::{AsError, TxOptions};

use crate::once::record::{
    self, CLAIMS, Done, Job, ROLLBACK_TO_SAVEPOINT, SAVEPOINT, Slot, Status, business,
    encode_output, slot_attempt, with_table,
};
use crate::once::statements::{MIGRATE_LOCK, migrate_lock_name};
use crate::once::{Dialect, Once, OnceError, OnceRun};

type DriverError = Box<dyn Error + Sync + Send>;

/// Runs the once transaction; when its claim finds no table, creates it and runs it once
/// more.
pub(super) async fn run_transaction<T, E, Via, F>(
    client: &mut Client,
    options: &TxOptions,
    job: &Arc<Job>,
    run: &OnceRun,
    f: F,
) -> Result<Done<T>, OnceError<E>>
where
    T: Serialize + DeserializeOwned,
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<tokio_postgres::Error> + AsError<Via>,
{
    let slot = Slot::new(f);
    with_table!(
        job,
        run,
        transaction = txretry_tokio_postgres::transaction_with(
            &mut *client,
            &job.policy,
            options,
            slot_attempt!(&slot, job, attempt)
        )
        .await,
        migrate = migrate(client, &run.once).await,
    )
}

/// Creates the table and its index if they do not exist, in a transaction that holds the
/// advisory lock the sqlx path takes too (concurrent `CREATE TABLE IF NOT EXISTS` of one
/// table can fail on Postgres).
pub(super) async fn migrate(client: &mut Client, once: &Once) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.execute(MIGRATE_LOCK, &[&migrate_lock_name(once.table_name())])
        .await?;
    tx.batch_execute(&once.statements(Dialect::Postgres).ddl)
        .await?;
    tx.commit().await
}

/// One attempt: claim, then replay or run `f` and record.
async fn attempt<T, E, Via, F>(tx: &mut Transaction<'_>, f: &mut F, job: &Job) -> Result<Done<T>, E>
where
    T: Serialize + DeserializeOwned,
    F: AsyncFnMut(&mut Transaction<'_>) -> Result<T, E>,
    E: From<tokio_postgres::Error> + AsError<Via>,
{
    let sql = &job.statements;
    let (tool, key): (&str, &str) = (&job.tool, &job.key);
    // A record deleted (pruned) between the claim and the read is claimed again; the last
    // read fails (no row) if it is gone again.
    let mut claims = 1;
    let row = loop {
        if let Err(error) = tx.execute(&*sql.claim, &[&tool, &key]).await {
            if error.code() == Some(&SqlState::UNDEFINED_TABLE) {
                job.missing_table.store(true, Ordering::Release);
            }
            return Err(E::from(error));
        }
        if claims == CLAIMS {
            break tx.query_one(&*sql.select, &[&tool, &key]).await?;
        }
        if let Some(row) = tx.query_opt(&*sql.select, &[&tool, &key]).await? {
            break row;
        }
        claims += 1;
    };
    if let Some(done) = replayed(&row)? {
        return Ok(done);
    }

    // The pending row is this transaction's own: run the work.
    tx.batch_execute(SAVEPOINT).await?;
    match f(&mut *tx).await {
        Ok(value) => {
            // What every repeated call will get: the value read back from its record. A
            // value that cannot be encoded fails the recording statement (a driver error).
            let (json, value) = match encode_output(&value) {
                Ok((json, value)) => (Recorded(Ok(json)), Some(value)),
                Err(e) => (Recorded(Err(e.to_string())), None),
            };
            tx.execute(&*sql.record_output, &[&json, &tool, &key])
                .await?;
            Ok(Done::Output(value.unwrap_or_else(|| {
                unreachable!("an output that failed to encode fails its recording")
            })))
        }
        Err(error) => {
            let Some(business) = business(&job.policy, &error) else {
                // Transient or ambiguous: the runner rolls everything back and decides.
                return Err(error);
            };
            // Undo the work, keep the claim. If even that fails (the connection broke),
            // that failure goes to the runner: nothing is recorded, a retry runs again.
            tx.batch_execute(ROLLBACK_TO_SAVEPOINT).await?;
            let (kind, message) = (business.kind(), business.message());
            tx.execute(&*sql.record_error, &[&kind, &message, &tool, &key])
                .await?;
            Ok(Done::Business(business))
        }
    }
}

/// The claimed row's decision (`status, output, error_kind, error_message`); a record
/// that cannot be read fails as the driver's decoding error.
fn replayed<T: DeserializeOwned>(row: &Row) -> Result<Option<Done<T>>, tokio_postgres::Error> {
    let StatusColumn(status) = row.try_get(0)?;
    let output = || row.try_get::<_, Output<T>>(1).map(|Output(value)| value);
    record::replay(status, output, row.try_get(2)?, row.try_get(3)?)
}

/// The `status` column, parsed.
struct StatusColumn(Status);

impl<'a> FromSql<'a> for StatusColumn {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, DriverError> {
        let status = <&str as FromSql>::from_sql(ty, raw)?;
        Ok(StatusColumn(Status::parse(status)?))
    }

    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

/// The `output` column of an `ok` record, decoded.
struct Output<T>(T);

impl<'a, T: DeserializeOwned> FromSql<'a> for Output<T> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, DriverError> {
        let json = <&str as FromSql>::from_sql(ty, raw)?;
        Ok(Output(record::decode_output(json)?))
    }

    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

/// An output's JSON, or why it could not be encoded.
#[derive(Debug)]
struct Recorded(Result<String, String>);

impl ToSql for Recorded {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, DriverError> {
        match &self.0 {
            Ok(json) => json.to_sql(ty, out),
            Err(error) => Err(error.clone().into()),
        }
    }

    fn accepts(ty: &Type) -> bool {
        <String as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}
