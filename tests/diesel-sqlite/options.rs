//! Options and what the runner leaves on the connection: read-only transactions
//! (`query_only`, put back), a panicking closure (rolled back), a runner called inside an
//! open Diesel transaction (refused, the transaction left alone).

use std::panic::{AssertUnwindSafe, catch_unwind};

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use txretry::{Phase, RetryPolicy, StopReason, TxError, TxOptions, Verdict};

use crate::common::{Db, assert_outcome, message, scalar};

fn query_only(conn: &mut SqliteConnection) -> i64 {
    scalar(conn, "SELECT query_only FROM pragma_query_only()")
}

#[test]
fn a_read_only_transaction_refuses_writes_and_puts_query_only_back() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY); INSERT INTO item VALUES (1);")
        .unwrap();
    let policy = RetryPolicy::default();
    let read_only = TxOptions::new().read_only(true);

    let n = txretry::diesel::transaction_with(&mut conn, &policy, &read_only, |conn| {
        Ok::<_, diesel::result::Error>(scalar(conn, "SELECT count(*) FROM item"))
    })
    .expect("a read");
    assert_eq!(n, 1);
    assert_eq!(query_only(&mut conn), 0, "put back after COMMIT");

    let mut calls = 0;
    let result: Result<(), TxError<diesel::result::Error>> =
        txretry::diesel::transaction_with(&mut conn, &policy, &read_only, |conn| {
            calls += 1;
            diesel::sql_query("INSERT INTO item VALUES (2)").execute(conn)?;
            Ok(())
        });
    let err = result.expect_err("a write under query_only");
    assert_eq!(
        message(err.error()),
        Some("attempt to write a readonly database")
    );
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(calls, 1);
    assert_eq!(query_only(&mut conn), 0, "put back after ROLLBACK");
    assert_eq!(scalar(&mut conn, "SELECT count(*) FROM item"), 1);
}

#[test]
fn a_connection_already_query_only_stays_so() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY); PRAGMA query_only = ON;")
        .unwrap();
    let read_only = TxOptions::new().read_only(true);
    txretry::diesel::transaction_with(&mut conn, &RetryPolicy::default(), &read_only, |conn| {
        Ok::<_, diesel::result::Error>(scalar(conn, "SELECT count(*) FROM item"))
    })
    .expect("a read");
    assert_eq!(query_only(&mut conn), 1, "the caller's setting is kept");
}

#[test]
fn a_panicking_closure_is_rolled_back_and_the_connection_stays_usable() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY)")
        .unwrap();

    let panicked = catch_unwind(AssertUnwindSafe(|| {
        let _ = txretry::diesel::transaction(&mut conn, &RetryPolicy::default(), |conn| {
            diesel::sql_query("INSERT INTO item VALUES (1)").execute(conn)?;
            if scalar(conn, "SELECT count(*) FROM item") == 1 {
                panic!("a bug in the closure");
            }
            Ok::<_, diesel::result::Error>(())
        });
    }));
    assert!(panicked.is_err());
    assert_eq!(
        scalar(&mut conn, "SELECT count(*) FROM item"),
        0,
        "rolled back"
    );
    txretry::diesel::transaction(&mut conn, &RetryPolicy::default(), |conn| {
        diesel::sql_query("INSERT INTO item VALUES (2)").execute(conn)
    })
    .expect("the connection runs the next transaction");
    assert_eq!(scalar(&mut conn, "SELECT count(*) FROM item"), 1);
}

#[test]
fn inside_an_open_diesel_transaction_the_runner_refuses_and_leaves_it_alone() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY)")
        .unwrap();

    conn.transaction(|conn| {
        diesel::sql_query("INSERT INTO item VALUES (1)").execute(conn)?;
        let inner: Result<(), TxError<diesel::result::Error>> =
            txretry::diesel::transaction(conn, &RetryPolicy::default(), |_conn| Ok(()));
        let err = inner.expect_err("already in a transaction");
        assert!(
            matches!(err.error(), diesel::result::Error::AlreadyInTransaction),
            "{err:?}"
        );
        assert_eq!(err.outcome().verdict(), Verdict::Permanent);
        Ok::<_, diesel::result::Error>(())
    })
    .expect("the outer transaction commits");
    assert_eq!(scalar(&mut conn, "SELECT count(*) FROM item"), 1);
}

/// Diesel's own nesting works inside the runner's transaction: an inner
/// `conn.transaction` is a savepoint, and its failure rolls back to it only.
#[test]
fn a_nested_diesel_transaction_is_a_savepoint() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY)")
        .unwrap();

    txretry::diesel::transaction(&mut conn, &RetryPolicy::default(), |conn| {
        diesel::sql_query("INSERT INTO item VALUES (1)").execute(conn)?;
        let inner = conn.transaction(|conn| {
            diesel::sql_query("INSERT INTO item VALUES (2)").execute(conn)?;
            diesel::sql_query("INSERT INTO item VALUES (1)").execute(conn) // duplicate
        });
        assert!(inner.is_err(), "the inner insert fails");
        diesel::sql_query("INSERT INTO item VALUES (3)").execute(conn)
    })
    .expect("the outer transaction commits");

    assert_eq!(scalar(&mut conn, "SELECT count(*) FROM item"), 2);
    assert_eq!(
        scalar(&mut conn, "SELECT count(*) FROM item WHERE id = 2"),
        0
    );
}
