//! `TxOptions::read_only`: `PRAGMA query_only` for the transaction's duration.

use std::panic::{AssertUnwindSafe, catch_unwind};

use rusqlite::Connection;
use txretry::{Code, TxError, TxOptions, Verdict};

use crate::common::{Db, assert_permanent_once, eager_policy, sqlite_code};

/// SQLITE_READONLY.
const READONLY: i32 = 8;

fn setup(db: &Db) -> Connection {
    let conn = db.open();
    conn.execute_batch(
        "CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
         INSERT INTO note (body) VALUES ('hello');",
    )
    .unwrap();
    conn
}

fn query_only(conn: &Connection) -> bool {
    conn.pragma_query_value(None, "query_only", |r| r.get(0))
        .unwrap()
}

fn notes(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM note", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_write_in_a_read_only_transaction_fails_once_as_permanent() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let read_only = TxOptions::new().read_only(true);

    let mut calls = 0;
    let result: Result<usize, TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction_with(&mut conn, &eager_policy(), &read_only, |tx| {
            calls += 1;
            tx.execute("INSERT INTO note (body) VALUES ('nope')", [])
        });

    let err = result.expect_err("query_only refuses writes");
    assert_eq!(sqlite_code(err.error()), Some(READONLY), "{err:?}");
    let found = txretry::classify(err.error());
    assert_eq!(found.verdict, Verdict::Permanent);
    assert_eq!(found.code, Some(Code::Sqlite(READONLY)));
    assert_permanent_once(&err, Some(Code::Sqlite(READONLY)));
    assert_eq!(calls, 1);

    // Restored after the error: the connection writes again outside the runner.
    assert!(!query_only(&conn));
    assert!(conn.is_autocommit());
    conn.execute("INSERT INTO note (body) VALUES ('after')", [])
        .unwrap();
    assert_eq!(notes(&conn), 2);
}

#[test]
fn a_read_only_transaction_reads_and_then_the_connection_writes_again() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let read_only = TxOptions::new().read_only(true);
    let body: Result<String, TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction_with(&mut conn, &eager_policy(), &read_only, |tx| {
            assert!(query_only(tx), "query_only is on inside the transaction");
            tx.query_row("SELECT body FROM note WHERE id = 1", [], |r| r.get(0))
        });
    assert_eq!(body.unwrap(), "hello");
    assert!(!query_only(&conn));

    // A read-write transaction on the same connection is unaffected.
    let done: Result<usize, TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction(&mut conn, &eager_policy(), |tx| {
            tx.execute("INSERT INTO note (body) VALUES ('rw')", [])
        });
    assert_eq!(done.unwrap(), 1);
}

/// A read-only transaction begins DEFERRED whatever `sqlite_begin` says: it takes no write
/// lock, so another connection writes while it is open.
#[test]
fn a_read_only_transaction_does_not_take_the_write_lock() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let other = db.open();
    let read_only = TxOptions::new()
        .read_only(true)
        .sqlite_begin(txretry::SqliteBegin::Exclusive);
    let seen: Result<(i64, i64), TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction_with(&mut conn, &eager_policy(), &read_only, |tx| {
            let before = notes(tx);
            other.execute("INSERT INTO note (body) VALUES ('concurrent')", [])?;
            Ok((before, notes(tx)))
        });
    assert_eq!(
        seen.unwrap(),
        (1, 1),
        "the read-only snapshot did not see the concurrent insert"
    );
    assert_eq!(notes(&conn), 2);
}

/// `query_only` that was already on stays on: the runner restores, it does not reset.
#[test]
fn query_only_already_on_stays_on() {
    let db = Db::wal();
    let mut conn = setup(&db);
    conn.execute_batch("PRAGMA query_only = ON").unwrap();
    let read_only = TxOptions::new().read_only(true);
    let n: Result<i64, TxError<rusqlite::Error>> =
        txretry::rusqlite::transaction_with(&mut conn, &eager_policy(), &read_only, |tx| {
            Ok(notes(tx))
        });
    assert_eq!(n.unwrap(), 1);
    assert!(query_only(&conn));
}

/// A panic in the closure: the transaction rolls back as it unwinds, `query_only` is
/// restored, and the panic reaches the caller.
#[test]
fn a_panicking_closure_leaves_the_connection_clean() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let read_only = TxOptions::new().read_only(true);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let _: Result<(), TxError<rusqlite::Error>> =
            txretry::rusqlite::transaction_with(&mut conn, &eager_policy(), &read_only, |_tx| {
                panic!("bug in the closure")
            });
    }));
    assert!(outcome.is_err(), "the panic propagates");
    assert!(conn.is_autocommit());
    assert!(!query_only(&conn));
}
