//! SQLITE_BUSY (5): two writers, busy_timeout 0. Connection A holds the write lock in
//! another thread; B's runner fails, A is released from the retry hook (channels, no
//! sleeps), and B's retry commits.

use std::sync::Mutex;
use std::sync::mpsc;
use std::thread;

use txretry::{
    Code, Phase, RetryPolicy, SqliteBegin, StopReason, TransientKind, TxError, TxOptions, Verdict,
};

use crate::common::{Db, assert_outcome, events, recording_policy, sqlite_code};

const BUSY: Verdict = Verdict::Transient(TransientKind::Busy);

fn setup(db: &Db) {
    db.open()
        .execute_batch("CREATE TABLE item (id INTEGER PRIMARY KEY, who TEXT NOT NULL)")
        .unwrap();
}

/// Holds `BEGIN IMMEDIATE` (plus one inserted row) on its own connection in another
/// thread until released. `release()` commits A's transaction and returns once it has.
struct Holder {
    release: mpsc::Sender<()>,
    released: Mutex<mpsc::Receiver<()>>,
    thread: thread::JoinHandle<()>,
}

impl Holder {
    fn start(db: &Db) -> Holder {
        let a = db.open();
        let (held_tx, held_rx) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let (released_tx, released) = mpsc::channel();
        let thread = thread::spawn(move || {
            a.execute_batch("BEGIN IMMEDIATE; INSERT INTO item VALUES (1, 'a');")
                .unwrap();
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            a.execute_batch("COMMIT").unwrap();
            released_tx.send(()).unwrap();
        });
        held_rx.recv().expect("A holds the write lock");
        Holder {
            release,
            released: Mutex::new(released),
            thread,
        }
    }

    fn release(&self) {
        self.release.send(()).unwrap();
        self.released.lock().unwrap().recv().unwrap();
    }
}

#[test]
fn a_second_writer_gets_busy_5_and_it_classifies_as_busy() {
    let db = Db::wal();
    setup(&db);
    let holder = Holder::start(&db);

    let b = db.open();
    let err = b
        .execute_batch("BEGIN IMMEDIATE")
        .expect_err("A holds the write lock");
    assert_eq!(sqlite_code(&err), Some(5), "{err:?}");
    let found = txretry::classify(&err);
    assert_eq!(found.verdict, BUSY);
    assert_eq!(found.code, Some(Code::Sqlite(5)));

    holder.release();
    holder.thread.join().unwrap();
}

/// B's runner begins IMMEDIATE (the default): BEGIN itself fails with BUSY, so the closure
/// runs only on the attempt that commits.
#[test]
fn the_runner_retries_busy_at_begin_until_the_other_writer_commits() {
    let db = Db::wal();
    setup(&db);
    let holder = std::sync::Arc::new(Holder::start(&db));
    let h = std::sync::Arc::clone(&holder);
    let (policy, seen) = recording_policy(5, move || h.release());

    let mut b = db.open();
    let mut calls = 0;
    let rows: Result<i64, TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction(&mut b, &policy, |tx| {
            calls += 1;
            tx.execute("INSERT INTO item VALUES (2, 'b')", [])?;
            tx.query_row("SELECT count(*) FROM item", [], |r| r.get(0))
        });

    assert_eq!(
        rows.expect("the retry commits"),
        2,
        "B saw A's committed row and its own"
    );
    assert_eq!(calls, 1, "BEGIN IMMEDIATE failed before the closure ran");
    assert_eq!(events(&seen), vec![(1, Some(Code::Sqlite(5)), BUSY)]);
    assert!(b.is_autocommit());
    let who: Vec<String> = b
        .prepare("SELECT who FROM item ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(who, ["a", "b"]);
    drop(policy); // drops the hook's handle on the holder
    std::sync::Arc::into_inner(holder)
        .expect("sole owner")
        .thread
        .join()
        .unwrap();
}

/// B's runner begins DEFERRED: BEGIN succeeds, the first write inside the closure fails
/// with BUSY, the runner rolls back and runs the closure again.
#[test]
fn the_runner_retries_busy_inside_the_closure() {
    let db = Db::wal();
    setup(&db);
    let holder = std::sync::Arc::new(Holder::start(&db));
    let h = std::sync::Arc::clone(&holder);
    let (policy, seen) = recording_policy(5, move || h.release());

    let mut b = db.open();
    let mut calls = 0;
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    let done: Result<(), TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction_with(&mut b, &policy, &deferred, |tx| {
            calls += 1;
            tx.execute("INSERT INTO item VALUES (2, 'b')", [])?;
            Ok(())
        });

    done.expect("the retry commits");
    assert_eq!(calls, 2);
    assert_eq!(events(&seen), vec![(1, Some(Code::Sqlite(5)), BUSY)]);
    let n: i64 = b
        .query_row("SELECT count(*) FROM item", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2);
    drop(policy);
    std::sync::Arc::into_inner(holder)
        .expect("sole owner")
        .thread
        .join()
        .unwrap();
}

/// With retries disabled the runner returns SQLite's error unchanged after one attempt,
/// and leaves no transaction open.
#[test]
fn without_retries_the_busy_error_comes_back_unchanged() {
    let db = Db::wal();
    setup(&db);
    let holder = Holder::start(&db);

    let mut b = db.open();
    let mut calls = 0;
    let result: Result<(), TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction(&mut b, &RetryPolicy::disabled(), |_tx| {
            calls += 1;
            Ok(())
        });
    let err = result.expect_err("A holds the write lock");
    assert_eq!(sqlite_code(err.error()), Some(5), "{err:?}");
    assert!(matches!(err.error(), rusqlite::Error::SqliteFailure(..)));
    // Recognised as busy at BEGIN; one attempt was all the policy allowed.
    assert_outcome(&err, BUSY, Phase::Body, 1, StopReason::AttemptsExhausted);
    assert_eq!(err.outcome().code(), Some(Code::Sqlite(5)));
    assert_eq!(calls, 0);
    assert!(b.is_autocommit());

    holder.release();
    holder.thread.join().unwrap();
}
