//! Failures at COMMIT. SQLite answers a failed COMMIT with a result code (Diesel keeps its
//! text): BUSY there means "not committed", and is retried like any other; a constraint
//! checked at COMMIT is returned once. Neither is ambiguous.

use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use txretry::{Backoff, Code, Phase, RetryPolicy, StopReason, TransientKind, TxError, Verdict};

use crate::common::{Db, assert_outcome, events, recording_policy, scalar};

/// Rollback-journal mode: a reader holding SHARED keeps the writer from taking the
/// EXCLUSIVE lock its COMMIT needs, so the COMMIT fails with BUSY and the transaction
/// stays open. Diesel rolls it back; the runner retries once the reader is done, and the
/// row is there once.
#[test]
fn busy_at_commit_is_retried_and_the_row_is_written_once() {
    let db = Db::rollback_journal();
    db.open()
        .batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY)")
        .unwrap();

    let mut reader = db.open();
    let (reading_tx, reading_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (released_tx, released_rx) = mpsc::channel();
    let reader_thread = thread::spawn(move || {
        reader.batch_execute("BEGIN").unwrap();
        assert_eq!(scalar(&mut reader, "SELECT count(*) FROM item"), 0);
        reading_tx.send(()).unwrap(); // holds SHARED until COMMIT
        release_rx.recv().unwrap();
        reader.batch_execute("COMMIT").unwrap();
        released_tx.send(()).unwrap();
    });
    reading_rx.recv().unwrap();

    let released_rx = Arc::new(Mutex::new(released_rx));
    let (policy, seen) = recording_policy(5, move || {
        release_tx.send(()).unwrap();
        released_rx.lock().unwrap().recv().unwrap();
    });

    let mut writer = db.open();
    let mut calls = 0;
    let result: Result<(), TxError<diesel::result::Error>> =
        txretry::diesel::transaction(&mut writer, &policy, |conn| {
            calls += 1;
            diesel::sql_query("INSERT INTO item VALUES (1)").execute(conn)?;
            Ok(())
        });

    result.expect("the retry commits");
    assert_eq!(calls, 2, "the first COMMIT failed after the closure ran");
    assert_eq!(
        events(&seen),
        vec![(
            1,
            Some(Code::Sqlite(5)),
            Verdict::Transient(TransientKind::Busy),
            Phase::Commit
        )]
    );
    assert_eq!(scalar(&mut writer, "SELECT count(*) FROM item"), 1);
    reader_thread.join().unwrap();
}

/// A deferred foreign key is checked at COMMIT: SQLite answers with a constraint, which is
/// permanent at COMMIT too; the runner returns it once and nothing was written.
#[test]
fn a_deferred_constraint_failing_at_commit_is_permanent() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.batch_execute(
        "PRAGMA foreign_keys = ON;
         CREATE TABLE parent (id INTEGER PRIMARY KEY);
         CREATE TABLE child (id INTEGER PRIMARY KEY,
             parent_id INTEGER NOT NULL REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);",
    )
    .unwrap();
    let policy = RetryPolicy::builder()
        .max_attempts(10)
        .backoff(Backoff::Constant(Duration::ZERO))
        .build()
        .unwrap();

    let mut calls = 0;
    let result: Result<(), TxError<diesel::result::Error>> =
        txretry::diesel::transaction(&mut conn, &policy, |conn| {
            calls += 1;
            diesel::sql_query("INSERT INTO child VALUES (1, 99)").execute(conn)?; // fine until COMMIT
            Ok(())
        });

    let err = result.expect_err("COMMIT fails");
    assert!(
        matches!(
            err.error(),
            diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::ForeignKeyViolation,
                _
            )
        ),
        "{err:?}"
    );
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Commit,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), Some(Code::Sqlite(19)));
    assert_eq!(calls, 1);
    assert_eq!(scalar(&mut conn, "SELECT count(*) FROM child"), 0);
    // The runner left no transaction open.
    conn.transaction(|conn| diesel::sql_query("INSERT INTO parent VALUES (1)").execute(conn))
        .expect("a fresh transaction");
}
