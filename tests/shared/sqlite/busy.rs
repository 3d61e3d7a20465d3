//! SQLITE_BUSY (5): two writers, busy_timeout 0. Connection A holds the write lock in
//! another thread; B's runner fails, A is released from the retry hook (channels, no
//! sleeps), and B's retry commits. B's row is there once, after A's.

use std::sync::{Arc, Mutex, mpsc};
use std::thread;

use txretry::{
    Code, Phase, RetryPolicy, SqliteBegin, StopReason, TransientKind, TxOptions, Verdict,
};
use txretry_testkit::outcome::assert_outcome;

use super::{Db, Sqlite, assert_idle, events, recording_policy};

const BUSY: Verdict = Verdict::Transient(TransientKind::Busy);

const INSERT_B: &str = "INSERT INTO item VALUES (2, 'b')";
const COUNT: &str = "SELECT count(*) FROM item";
/// Who wrote the rows, in order: `a,b` when A's row and B's are there, once each.
const WHO: &str =
    "SELECT coalesce(group_concat(who, ','), '') FROM (SELECT who FROM item ORDER BY id)";

fn setup<D: Sqlite>() -> Db<D> {
    let db = Db::<D>::wal();
    D::batch(
        &mut db.open(),
        "CREATE TABLE item (id INTEGER PRIMARY KEY, who TEXT NOT NULL)",
    )
    .unwrap();
    db
}

/// Holds `BEGIN IMMEDIATE` (plus one inserted row) on its own connection in another
/// thread until released. `release()` commits A's transaction and returns once it has.
struct Holder {
    release: mpsc::Sender<()>,
    released: Mutex<mpsc::Receiver<()>>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
}

impl Holder {
    fn start<D: Sqlite>(db: &Db<D>) -> Arc<Holder> {
        let mut a = db.open();
        let (held_tx, held_rx) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let (released_tx, released) = mpsc::channel();
        let thread = thread::spawn(move || {
            D::batch(&mut a, "BEGIN IMMEDIATE; INSERT INTO item VALUES (1, 'a');").unwrap();
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            D::batch(&mut a, "COMMIT").unwrap();
            released_tx.send(()).unwrap();
        });
        held_rx.recv().expect("A holds the write lock");
        Arc::new(Holder {
            release,
            released: Mutex::new(released),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Lets A commit, and waits until it has (and its thread has ended).
    fn release(&self) {
        self.release.send(()).unwrap();
        self.released.lock().unwrap().recv().unwrap();
        if let Some(thread) = self.thread.lock().unwrap().take() {
            thread.join().unwrap();
        }
    }
}

/// B's own `BEGIN IMMEDIATE` gets BUSY, as the driver reports it, and txretry classifies
/// the driver's error as busy with code 5.
pub fn a_second_writer_gets_busy<D: Sqlite>() {
    let db = setup::<D>();
    let holder = Holder::start(&db);

    let mut b = db.open();
    let err = D::batch(&mut b, "BEGIN IMMEDIATE").expect_err("A holds the write lock");
    D::assert_busy(&err);
    let found = txretry::classify(&err);
    assert_eq!(found.verdict, BUSY);
    assert_eq!(found.code, Some(Code::Sqlite(5)));

    holder.release();
}

/// B's runner begins IMMEDIATE (the default): BEGIN itself fails with BUSY, so the closure
/// runs only on the attempt that commits.
pub fn retried_at_begin<D: Sqlite>() {
    retried::<D>(None, 1, "BEGIN IMMEDIATE failed before the closure ran");
}

/// B's runner begins DEFERRED: BEGIN succeeds, the first write inside the closure fails
/// with BUSY, the runner rolls back and runs the closure again.
pub fn retried_inside_the_closure<D: Sqlite>() {
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    retried::<D>(
        Some(&deferred),
        2,
        "the first attempt's write failed inside the closure",
    );
}

/// B's runner (with `options`, if any) gets BUSY once, the retry hook lets A commit, and
/// the retry commits; the closure ran `calls` times in all.
fn retried<D: Sqlite>(options: Option<&TxOptions>, calls: u32, why: &str) {
    let db = setup::<D>();
    let holder = Holder::start(&db);
    let h = Arc::clone(&holder);
    let (policy, seen) = recording_policy(5, move || h.release());

    let mut b = db.open();
    let mut ran = 0;
    let rows = D::transaction(&mut b, &policy, options, &mut ran, &[INSERT_B], COUNT);

    assert_eq!(
        rows.expect("the retry commits"),
        2,
        "B saw A's committed row and its own"
    );
    assert_eq!(ran, calls, "{why}");
    assert_eq!(
        events(&seen),
        vec![(1, Some(Code::Sqlite(5)), BUSY, Phase::Body)]
    );
    assert_idle::<D>(&mut b);
    assert_eq!(D::text(&mut b, WHO), "a,b");
}

/// With retries disabled the runner returns the driver's error unchanged after one
/// attempt, and leaves no transaction open.
pub fn without_retries<D: Sqlite>() {
    let db = setup::<D>();
    let holder = Holder::start(&db);

    let mut b = db.open();
    let mut calls = 0;
    let err = D::transaction(
        &mut b,
        &RetryPolicy::disabled(),
        None,
        &mut calls,
        &[INSERT_B],
        COUNT,
    )
    .expect_err("A holds the write lock");
    D::assert_busy(err.error());
    // Recognised as busy at BEGIN; one attempt was all the policy allowed.
    assert_outcome(&err, BUSY, Phase::Body, 1, StopReason::AttemptsExhausted);
    assert_eq!(err.outcome().code(), Some(Code::Sqlite(5)));
    assert_eq!(calls, 0);

    holder.release();
    assert_idle::<D>(&mut b);
    assert_eq!(D::text(&mut b, WHO), "a", "B wrote nothing");
}
