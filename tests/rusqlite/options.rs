//! `TxOptions`: how each attempt begins. Observed from a second connection while the
//! runner's closure is running, before it touched the database.

use std::time::Duration;

use rusqlite::Connection;
use txretry::{Backoff, Isolation, RetryPolicy, SqliteBegin, TxError, TxOptions};

use crate::common::{Db, sqlite_code};

fn once() -> RetryPolicy {
    RetryPolicy::disabled()
}

/// Whether `other` can take the write lock while the runner's transaction is open.
fn other_can_write_during(db: &Db, options: &TxOptions) -> Result<(), i32> {
    let mut conn = db.open();
    let other = db.open();
    let result: Result<Result<(), i32>, TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction_with(&mut conn, &once(), options, |_tx| {
            let probe = other.execute_batch("BEGIN IMMEDIATE");
            Ok(match probe {
                Ok(()) => {
                    other.execute_batch("ROLLBACK")?;
                    Ok(())
                }
                Err(e) => Err(sqlite_code(&e).unwrap_or(-1)),
            })
        });
    result.expect("the runner's own transaction commits")
}

#[test]
fn the_default_begins_immediate() {
    let db = Db::wal();
    assert_eq!(other_can_write_during(&db, &TxOptions::default()), Err(5));
    let immediate = TxOptions::new().sqlite_begin(SqliteBegin::Immediate);
    assert_eq!(other_can_write_during(&db, &immediate), Err(5));
}

#[test]
fn deferred_takes_no_lock_until_used() {
    let db = Db::wal();
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    assert_eq!(other_can_write_during(&db, &deferred), Ok(()));
}

/// In rollback-journal mode EXCLUSIVE also keeps readers out (in WAL it acts as IMMEDIATE).
#[test]
fn exclusive_keeps_readers_out_in_rollback_journal_mode() {
    let db = Db::rollback_journal();
    db.open().execute_batch("CREATE TABLE t (x)").unwrap();
    let read = |options: &TxOptions| -> Result<i64, i32> {
        let mut conn = db.open();
        let other: Connection = db.open();
        let result: Result<Result<i64, i32>, TxError<rusqlite::Error>> =
            txretry::rusqlite::transaction_with(&mut conn, &once(), options, |_tx| {
                Ok(other
                    .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                    .map_err(|e| sqlite_code(&e).unwrap_or(-1)))
            });
        result.unwrap()
    };
    assert_eq!(
        read(&TxOptions::new().sqlite_begin(SqliteBegin::Exclusive)),
        Err(5)
    );
    assert_eq!(
        read(&TxOptions::new().sqlite_begin(SqliteBegin::Immediate)),
        Ok(0)
    );
}

/// SQLite transactions are serializable; an isolation level is accepted and ignored.
#[test]
fn isolation_is_ignored() {
    let db = Db::wal();
    let mut conn = db.open();
    let options = TxOptions::new().isolation(Isolation::ReadCommitted);
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::Constant(Duration::ZERO))
        .build()
        .unwrap();
    let n: Result<i64, TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction_with(&mut conn, &policy, &options, |tx| {
            tx.query_row("SELECT 1", [], |r| r.get(0))
        });
    assert_eq!(n.unwrap(), 1);
}
