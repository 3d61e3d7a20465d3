//! Failures at COMMIT. SQLite answers a failed COMMIT with a result code and leaves the
//! transaction open: the runner rolls back, then the code decides. BUSY there means "not
//! committed" and is retried like any other; a constraint checked at COMMIT is returned
//! once. Neither is ambiguous.

use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use txretry::{Backoff, Code, Phase, RetryPolicy, StopReason, TransientKind, Verdict};
use txretry_testkit::outcome::assert_outcome;

use super::{Db, Sqlite, assert_idle, events, recording_policy};

/// In rollback-journal mode a reader's SHARED lock keeps the writer from taking the
/// EXCLUSIVE lock its COMMIT needs, so the COMMIT fails with SQLITE_BUSY (busy_timeout 0)
/// and the transaction stays open. Nothing was committed, and SQLite said so with a code:
/// the runner rolls back and retries, after the retry hook has let the reader finish. The
/// row is there once.
pub fn busy_at_commit<D: Sqlite>() {
    let db = Db::<D>::rollback_journal();
    D::batch(&mut db.open(), "CREATE TABLE item (id INTEGER PRIMARY KEY)").unwrap();

    let mut reader = db.open();
    let (reading_tx, reading_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (released_tx, released_rx) = mpsc::channel();
    let reader_thread = thread::spawn(move || {
        D::batch(&mut reader, "BEGIN").unwrap();
        assert_eq!(D::scalar(&mut reader, "SELECT count(*) FROM item"), 0);
        reading_tx.send(()).unwrap(); // holds SHARED until COMMIT
        release_rx.recv().unwrap();
        D::batch(&mut reader, "COMMIT").unwrap();
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
    let result = D::transaction(
        &mut writer,
        &policy,
        None,
        &mut calls,
        &["INSERT INTO item VALUES (1)"],
        "SELECT count(*) FROM item",
    );

    assert_eq!(result.expect("the retry commits"), 1);
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
    assert_idle::<D>(&mut writer);
    assert_eq!(
        D::scalar(&mut writer, "SELECT count(*) FROM item"),
        1,
        "inserted exactly once"
    );
    reader_thread.join().unwrap();
}

/// A deferred foreign key is checked at COMMIT: the COMMIT fails with a constraint code,
/// which is permanent at COMMIT too (SQLite answered "not committed" with a code: not
/// ambiguous); the runner rolls back the transaction COMMIT left open and returns the
/// error once. Nothing was written.
pub fn deferred_constraint_at_commit<D: Sqlite>() {
    let db = Db::<D>::wal();
    let mut conn = db.open();
    D::batch(
        &mut conn,
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
    let err = D::transaction(
        &mut conn,
        &policy,
        None,
        &mut calls,
        &["INSERT INTO child VALUES (1, 99)"], // fine until COMMIT
        "SELECT count(*) FROM child",
    )
    .expect_err("COMMIT fails");

    D::assert_foreign_key(err.error());
    let found = txretry::classify(err.error());
    assert_eq!(found.verdict, Verdict::Permanent);
    assert_eq!(found.code, Some(D::FOREIGN_KEY));
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Commit,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), Some(D::FOREIGN_KEY));
    assert_eq!(calls, 1);
    assert_idle::<D>(&mut conn);
    assert_eq!(D::scalar(&mut conn, "SELECT count(*) FROM child"), 0);
}
