//! A business error returned by the closure is rolled back and returned once, unchanged,
//! whatever error type carries it.

use std::time::Duration;

use txretry::{Backoff, RetryPolicy};

use crate::common::Db;

#[derive(Debug, thiserror::Error)]
enum OrderError {
    #[error("order {0} not found")]
    NotFound(i64),
    #[error(transparent)]
    Db(#[from] rusqlite::Error),
}

/// Many attempts and no wait: a retry would show in the call count.
fn eager_policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(10)
        .backoff(Backoff::Constant(Duration::ZERO))
        .build()
        .unwrap()
}

fn setup(db: &Db) -> rusqlite::Connection {
    let conn = db.open();
    conn.execute_batch("CREATE TABLE audit (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
        .unwrap();
    conn
}

fn audit_rows(conn: &rusqlite::Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_thiserror_business_error_runs_once_and_is_rolled_back() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let mut calls = 0;
    let result: Result<(), OrderError> =
        txretry::rusqlite::transaction(&mut conn, &eager_policy(), |tx| {
            calls += 1;
            tx.execute("INSERT INTO audit (note) VALUES ('looked up order 7')", [])?;
            Err(OrderError::NotFound(7))
        });
    assert!(matches!(result, Err(OrderError::NotFound(7))), "{result:?}");
    assert_eq!(calls, 1);
    assert_eq!(audit_rows(&conn), 0, "the insert was rolled back");
    assert!(conn.is_autocommit());
}

/// `E = anyhow::Error`: the closure's `?` converts rusqlite errors, `bail!` is the business error.
#[test]
fn an_anyhow_business_error_runs_once() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let mut calls = 0;
    let result: Result<(), anyhow::Error> =
        txretry::rusqlite::transaction(&mut conn, &eager_policy(), |tx| {
            calls += 1;
            tx.execute("INSERT INTO audit (note) VALUES ('x')", [])?;
            anyhow::bail!("customer 42 is suspended")
        });
    assert_eq!(result.unwrap_err().to_string(), "customer 42 is suspended");
    assert_eq!(calls, 1);
    assert_eq!(audit_rows(&conn), 0);
}

#[test]
fn a_boxed_business_error_runs_once() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let mut calls = 0;
    let result: Result<(), Box<dyn std::error::Error + Send + Sync>> =
        txretry::rusqlite::transaction(&mut conn, &eager_policy(), |tx| {
            calls += 1;
            tx.execute("INSERT INTO audit (note) VALUES ('x')", [])?;
            Err("out of stock".into())
        });
    assert_eq!(result.unwrap_err().to_string(), "out of stock");
    assert_eq!(calls, 1);
    assert_eq!(audit_rows(&conn), 0);
}

/// `QueryReturnedNoRows` is rusqlite's own error with no SQLite code: permanent.
#[test]
fn query_returned_no_rows_runs_once() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let mut calls = 0;
    let result: Result<String, rusqlite::Error> =
        txretry::rusqlite::transaction(&mut conn, &eager_policy(), |tx| {
            calls += 1;
            tx.query_row("SELECT note FROM audit WHERE id = 99", [], |r| r.get(0))
        });
    assert!(
        matches!(result, Err(rusqlite::Error::QueryReturnedNoRows)),
        "{result:?}"
    );
    assert_eq!(calls, 1);
}
