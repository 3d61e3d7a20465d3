//! Failures at COMMIT. SQLite always answers a failed COMMIT with a result code, and
//! leaves the transaction open: the runner rolls back, then the code decides.

use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use txretry::{Backoff, Code, RetryPolicy, TransientKind, Verdict};

use crate::common::{Db, events, recording_policy, sqlite_code};

/// SQLITE_CONSTRAINT_FOREIGNKEY.
const FOREIGN_KEY: i32 = 787;

/// A deferred foreign key is checked at COMMIT: the COMMIT fails with a constraint code,
/// which is permanent; the runner rolls back and returns it once.
#[test]
fn a_deferred_constraint_failing_at_commit_is_permanent_and_rolled_back() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.execute_batch(
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
    let result: Result<(), rusqlite::Error> =
        txretry::rusqlite::transaction(&mut conn, &policy, |tx| {
            calls += 1;
            tx.execute("INSERT INTO child VALUES (1, 99)", [])?; // fine until COMMIT
            Ok(())
        });

    let err = result.expect_err("COMMIT fails");
    assert_eq!(sqlite_code(&err), Some(FOREIGN_KEY), "{err:?}");
    let found = txretry::classify(&err);
    assert_eq!(found.verdict, Verdict::Permanent);
    assert_eq!(found.code, Some(Code::Sqlite(FOREIGN_KEY)));
    assert_eq!(calls, 1);
    assert!(
        conn.is_autocommit(),
        "the runner rolled back the transaction COMMIT left open"
    );
    let n: i64 = conn
        .query_row("SELECT count(*) FROM child", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
}

/// In rollback-journal mode a reader's SHARED lock makes the writer's COMMIT fail with
/// SQLITE_BUSY (busy_timeout 0). Nothing was committed, the server said so with a code: the
/// runner rolls back and retries, after the retry hook has let the reader finish.
#[test]
fn busy_at_commit_is_rolled_back_and_retried() {
    let db = Db::rollback_journal();
    db.open()
        .execute_batch("CREATE TABLE item (id INTEGER PRIMARY KEY)")
        .unwrap();

    let reader = db.open();
    let (reading_tx, reading_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (released_tx, released_rx) = mpsc::channel();
    let reader_thread = thread::spawn(move || {
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM item", [], |r| r.get(0))
            .unwrap();
        reading_tx.send(()).unwrap(); // holds SHARED until COMMIT
        release_rx.recv().unwrap();
        reader.execute_batch("COMMIT").unwrap();
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
    let result: Result<(), rusqlite::Error> =
        txretry::rusqlite::transaction(&mut writer, &policy, |tx| {
            calls += 1;
            tx.execute("INSERT INTO item VALUES (1)", [])?;
            Ok(())
        });

    result.expect("the retry commits");
    assert_eq!(calls, 2, "the first COMMIT failed after the closure ran");
    assert_eq!(
        events(&seen),
        vec![(
            1,
            Some(Code::Sqlite(5)),
            Verdict::Transient(TransientKind::Busy)
        )]
    );
    let n: i64 = writer
        .query_row("SELECT count(*) FROM item", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1, "inserted exactly once");
    reader_thread.join().unwrap();
}
