//! Failures at COMMIT. SQLite always answers a failed COMMIT with a result code, and
//! leaves the transaction open: the runner rolls back, then the code decides.

use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use txretry::{Backoff, Code, Phase, RetryPolicy, StopReason, TransientKind, TxError, Verdict};

use crate::common::{Db, assert_outcome, events, recording_policy, sqlite_code};

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
    let result: Result<(), TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction(&mut conn, &policy, |tx| {
            calls += 1;
            tx.execute("INSERT INTO child VALUES (1, 99)", [])?; // fine until COMMIT
            Ok(())
        });

    let err = result.expect_err("COMMIT fails");
    assert_eq!(sqlite_code(err.error()), Some(FOREIGN_KEY), "{err:?}");
    let found = txretry::classify(err.error());
    assert_eq!(found.verdict, Verdict::Permanent);
    assert_eq!(found.code, Some(Code::Sqlite(FOREIGN_KEY)));
    // SQLite answered "not committed" with a code: permanent at COMMIT, not ambiguous.
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Commit,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), Some(Code::Sqlite(FOREIGN_KEY)));
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
    let result: Result<(), TxError<rusqlite::Error>> =
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

/// SQLITE_ERROR: "cannot commit - no transaction is active".
const NO_TRANSACTION: i32 = 1;
/// SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_TRIGGER.
const PRIMARY_KEY: i32 = 1555;
const TRIGGER: i32 = 1811;

/// SQLite can end a transaction on its own in the middle of it: a constraint declared
/// `ON CONFLICT ROLLBACK`, or a trigger's `RAISE(ROLLBACK, …)`, fails the statement and rolls
/// back the whole transaction. A closure that swallows that error and returns `Ok` must not
/// be told its work committed: the runner's COMMIT finds no transaction and fails, the runner
/// returns that error (permanent, at commit, after one attempt), and nothing the closure
/// wrote is in the database.
#[test]
fn a_transaction_sqlite_rolled_back_is_not_reported_as_committed() {
    let cases = [
        (
            "ON CONFLICT ROLLBACK",
            "CREATE TABLE item (id INTEGER PRIMARY KEY ON CONFLICT ROLLBACK, note TEXT NOT NULL);
             INSERT INTO item VALUES (1, 'existing');",
            PRIMARY_KEY,
        ),
        (
            "RAISE(ROLLBACK)",
            "CREATE TABLE item (id INTEGER PRIMARY KEY, note TEXT NOT NULL);
             INSERT INTO item VALUES (1, 'existing');
             CREATE TRIGGER no_dupes BEFORE INSERT ON item
               WHEN EXISTS (SELECT 1 FROM item WHERE id = NEW.id)
               BEGIN SELECT RAISE(ROLLBACK, 'item already exists'); END;",
            TRIGGER,
        ),
    ];
    for (case, schema, swallowed_code) in cases {
        let db = Db::wal();
        let mut conn = db.open();
        conn.execute_batch(schema).unwrap();
        conn.execute_batch("CREATE TABLE audit (note TEXT NOT NULL)")
            .unwrap();
        let policy = RetryPolicy::builder()
            .max_attempts(5)
            .retry_on(txretry::KindSet::ALL)
            .backoff(Backoff::Constant(Duration::ZERO))
            .build()
            .unwrap();

        let mut calls = 0;
        let mut swallowed = Vec::new();
        let result: Result<(), TxError<rusqlite::Error>> =
            txretry::rusqlite::transaction(&mut conn, &policy, |tx| {
                calls += 1;
                tx.execute("INSERT INTO audit VALUES ('importing item 1')", [])?;
                tx.execute("INSERT INTO item VALUES (2, 'new')", [])?;
                // The bug under test: the error is dropped and the closure carries on.
                if let Err(e) = tx.execute("INSERT INTO item VALUES (1, 'duplicate')", []) {
                    swallowed.push((sqlite_code(&e), tx.is_autocommit()));
                }
                Ok(())
            });

        assert_eq!(
            swallowed,
            [(Some(swallowed_code), true)],
            "{case}: SQLite rolled the transaction back by itself"
        );
        let err = result.expect_err(case);
        assert_eq!(
            sqlite_code(err.error()),
            Some(NO_TRANSACTION),
            "{case}: {err:?}"
        );
        assert!(
            err.to_string().contains("no transaction is active"),
            "{case}: {err}"
        );
        assert_outcome(
            &err,
            Verdict::Permanent,
            Phase::Commit,
            1,
            StopReason::NotRetryable,
        );
        assert_eq!(err.outcome().code(), Some(Code::Sqlite(NO_TRANSACTION)));
        assert_eq!(calls, 1, "{case}");
        assert!(conn.is_autocommit(), "{case}");
        let (items, audit): (i64, i64) = conn
            .query_row(
                "SELECT (SELECT count(*) FROM item), (SELECT count(*) FROM audit)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(
            (items, audit),
            (1, 0),
            "{case}: nothing the closure wrote committed"
        );
    }
}

/// The other half of the limitation: statements the closure runs after SQLite rolled the
/// transaction back run outside any transaction and are committed one by one, before the
/// runner's COMMIT fails. The runner still returns the error (so the call is never reported
/// as committed), but it cannot undo those writes: propagate errors with `?`.
#[test]
fn a_write_after_sqlite_rolled_back_is_committed_on_its_own() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.execute_batch(
        "CREATE TABLE item (id INTEGER PRIMARY KEY ON CONFLICT ROLLBACK, note TEXT NOT NULL);
         INSERT INTO item VALUES (1, 'existing');
         CREATE TABLE audit (note TEXT NOT NULL);",
    )
    .unwrap();
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::Constant(Duration::ZERO))
        .build()
        .unwrap();
    let mut calls = 0;
    let result: Result<(), TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction(&mut conn, &policy, |tx| {
            calls += 1;
            tx.execute("INSERT INTO audit VALUES ('before')", [])?;
            let _ = tx.execute("INSERT INTO item VALUES (1, 'duplicate')", []);
            tx.execute("INSERT INTO audit VALUES ('after')", [])?;
            Ok(())
        });
    let err = result.expect_err("COMMIT finds no transaction");
    assert_eq!(sqlite_code(err.error()), Some(NO_TRANSACTION), "{err:?}");
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Commit,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(calls, 1);
    let notes: Vec<String> = conn
        .prepare("SELECT note FROM audit")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        notes,
        ["after"],
        "the write after the rollback committed on its own"
    );
}
