//! SQLITE_BUSY: two writers, busy_timeout 0. Connection A holds the write lock in another
//! thread; B's runner fails, A is released from the retry hook (channels, no sleeps), and
//! B's retry commits.

use std::sync::{Arc, Mutex, mpsc};
use std::thread;

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use txretry::{
    Code, Phase, RetryPolicy, SqliteBegin, StopReason, TransientKind, TxError, TxOptions, Verdict,
};

use crate::common::{Db, assert_outcome, events, message, recording_policy, scalar};

const BUSY: Verdict = Verdict::Transient(TransientKind::Busy);

fn setup(db: &Db) {
    db.open()
        .batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY, who TEXT NOT NULL)")
        .unwrap();
}

/// Holds `BEGIN IMMEDIATE` (plus one inserted row) on its own connection in another
/// thread until released. `release()` commits A's transaction and returns once it has.
struct Holder {
    release: mpsc::Sender<()>,
    released: Mutex<mpsc::Receiver<()>>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
}

impl Holder {
    fn start(db: &Db) -> Arc<Holder> {
        let mut a = db.open();
        let (held_tx, held_rx) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let (released_tx, released) = mpsc::channel();
        let thread = thread::spawn(move || {
            a.batch_execute("BEGIN IMMEDIATE; INSERT INTO item VALUES (1, 'a');")
                .unwrap();
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            a.batch_execute("COMMIT").unwrap();
            released_tx.send(()).unwrap();
        });
        held_rx.recv().expect("A holds the write lock");
        Arc::new(Holder {
            release,
            released: Mutex::new(released),
            thread: Mutex::new(Some(thread)),
        })
    }

    fn release(&self) {
        self.release.send(()).unwrap();
        self.released.lock().unwrap().recv().unwrap();
        if let Some(thread) = self.thread.lock().unwrap().take() {
            thread.join().unwrap();
        }
    }
}

#[test]
fn a_second_writer_gets_busy_and_diesels_error_classifies_as_busy() {
    let db = Db::wal();
    setup(&db);
    let holder = Holder::start(&db);

    let mut b = db.open();
    let err = b
        .batch_execute("BEGIN IMMEDIATE")
        .expect_err("A holds the write lock");
    // What Diesel keeps of SQLITE_BUSY: SQLite's text, no code.
    assert_eq!(message(&err), Some("database is locked"), "{err:?}");
    let found = txretry::classify(&err);
    assert_eq!(found.verdict, BUSY);
    assert_eq!(found.code, Some(Code::Sqlite(5)));

    holder.release();
}

/// B's runner begins IMMEDIATE (the default): BEGIN itself fails with BUSY, so the closure
/// runs only on the attempt that commits.
#[test]
fn the_runner_retries_busy_at_begin_until_the_other_writer_commits() {
    let db = Db::wal();
    setup(&db);
    let holder = Holder::start(&db);
    let h = Arc::clone(&holder);
    let (policy, seen) = recording_policy(5, move || h.release());

    let mut b = db.open();
    let mut calls = 0;
    let rows: Result<i64, TxError<diesel::result::Error>> =
        txretry::diesel::transaction(&mut b, &policy, |conn| {
            calls += 1;
            diesel::sql_query("INSERT INTO item VALUES (2, 'b')").execute(conn)?;
            Ok(scalar(conn, "SELECT count(*) FROM item"))
        });

    assert_eq!(rows.expect("the retry commits"), 2, "A's row and B's");
    assert_eq!(calls, 1, "BEGIN IMMEDIATE failed before the closure ran");
    assert_eq!(
        events(&seen),
        vec![(1, Some(Code::Sqlite(5)), BUSY, Phase::Body)]
    );
    assert_eq!(
        scalar(&mut b, "SELECT count(*) FROM item WHERE who = 'b'"),
        1
    );
}

/// B's runner begins DEFERRED: BEGIN succeeds, the first write inside the closure fails
/// with BUSY, the runner rolls back and runs the closure again; B's row is there once.
#[test]
fn the_runner_retries_busy_inside_the_closure() {
    let db = Db::wal();
    setup(&db);
    let holder = Holder::start(&db);
    let h = Arc::clone(&holder);
    let (policy, seen) = recording_policy(5, move || h.release());

    let mut b = db.open();
    let mut calls = 0;
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    txretry::diesel::transaction_with(&mut b, &policy, &deferred, |conn| {
        calls += 1;
        diesel::sql_query("INSERT INTO item VALUES (2, 'b')").execute(conn)?;
        Ok::<_, diesel::result::Error>(())
    })
    .expect("the retry commits");

    assert_eq!(calls, 2);
    assert_eq!(
        events(&seen),
        vec![(1, Some(Code::Sqlite(5)), BUSY, Phase::Body)]
    );
    assert_eq!(scalar(&mut b, "SELECT count(*) FROM item"), 2);
    assert_eq!(
        scalar(&mut b, "SELECT count(*) FROM item WHERE who = 'b'"),
        1
    );
}

/// With retries disabled the runner returns Diesel's error unchanged after one attempt,
/// and the connection can run a transaction right after.
#[test]
fn without_retries_the_busy_error_comes_back_unchanged() {
    let db = Db::wal();
    setup(&db);
    let holder = Holder::start(&db);

    let mut b = db.open();
    let mut calls = 0;
    let result: Result<(), TxError<diesel::result::Error>> =
        txretry::diesel::transaction(&mut b, &RetryPolicy::disabled(), |_conn| {
            calls += 1;
            Ok(())
        });
    let err = result.expect_err("A holds the write lock");
    assert_eq!(message(err.error()), Some("database is locked"), "{err:?}");
    assert_outcome(&err, BUSY, Phase::Body, 1, StopReason::AttemptsExhausted);
    assert_eq!(err.outcome().code(), Some(Code::Sqlite(5)));
    assert_eq!(calls, 0);

    holder.release();
    // Diesel does not count a transaction open: the next one begins.
    b.transaction(|conn| diesel::sql_query("INSERT INTO item VALUES (3, 'b')").execute(conn))
        .expect("a fresh transaction");
}
