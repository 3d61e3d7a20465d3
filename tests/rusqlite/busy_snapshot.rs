//! SQLITE_BUSY_SNAPSHOT (517): in WAL mode, a DEFERRED transaction reads (taking a
//! snapshot), another connection commits a write, and the first one's write fails: its
//! snapshot is stale. No busy timeout cures it; only restarting the transaction does.

use txretry::{Code, Phase, SqliteBegin, TransientKind, TxOptions, Verdict};

use crate::common::{Db, events, recording_policy, sqlite_code};

const BUSY: Verdict = Verdict::Transient(TransientKind::Busy);

fn setup(db: &Db) {
    db.open()
        .execute_batch(
            "CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
             INSERT INTO counter VALUES (1, 0);",
        )
        .unwrap();
}

#[test]
fn a_stale_wal_snapshot_gives_517_and_it_classifies_as_busy() {
    let db = Db::wal();
    setup(&db);
    let a = db.open();
    let b = db.open();

    a.execute_batch("BEGIN DEFERRED").unwrap();
    let n: i64 = a
        .query_row("SELECT n FROM counter WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    b.execute("UPDATE counter SET n = n + 10 WHERE id = 1", [])
        .unwrap();
    let err = a
        .execute("UPDATE counter SET n = n + 1 WHERE id = 1", [])
        .expect_err("stale snapshot");

    assert_eq!(sqlite_code(&err), Some(517), "{err:?}");
    let found = txretry::classify(&err);
    assert_eq!(found.verdict, BUSY);
    assert_eq!(found.code, Some(Code::Sqlite(517)));
    assert!(
        !a.is_autocommit(),
        "SQLite leaves the transaction open after 517"
    );
    a.execute_batch("ROLLBACK").unwrap();
}

/// A read-modify-write through the runner: on the first attempt another connection commits
/// between the read and the write. Without the restart the write would be lost (or, with
/// the value read, overwrite B's); with it, both increments land.
#[test]
fn the_runner_restarts_a_transaction_whose_snapshot_went_stale() {
    let db = Db::wal();
    setup(&db);
    let mut a = db.open();
    let b = db.open();
    let (policy, seen) = recording_policy(5, || {});

    let mut reads = Vec::new();
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    let result: Result<i64, txretry::TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction_with(&mut a, &policy, &deferred, |tx| {
            let n: i64 = tx.query_row("SELECT n FROM counter WHERE id = 1", [], |r| r.get(0))?;
            reads.push(n);
            if reads.len() == 1 {
                // Another writer commits after this transaction took its snapshot.
                b.execute("UPDATE counter SET n = n + 10 WHERE id = 1", [])?;
            }
            tx.execute("UPDATE counter SET n = ?1 WHERE id = 1", [n + 1])?;
            Ok(n + 1)
        });

    assert_eq!(result.expect("the retry commits"), 11);
    assert_eq!(reads, [0, 10], "the retry read B's committed value");
    assert_eq!(
        events(&seen),
        vec![(1, Some(Code::Sqlite(517)), BUSY, Phase::Body)]
    );
    assert!(a.is_autocommit());
    let n: i64 = b
        .query_row("SELECT n FROM counter WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 11);
}
