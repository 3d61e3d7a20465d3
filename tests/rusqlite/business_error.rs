//! A business error returned by the closure is rolled back and returned once, unchanged,
//! whatever error type carries it; the outcome says so (permanent, in the body, one attempt).

use std::time::Duration;

use txretry::{Backoff, Classifier, MessageFallback, RetryPolicy, StopReason, Verdict};

use crate::common::{Db, assert_permanent_once, eager_policy, run_counting};

#[derive(Debug, thiserror::Error)]
enum OrderError {
    #[error("order {0} not found")]
    NotFound(i64),
    #[error(transparent)]
    Db(#[from] rusqlite::Error),
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
    let (result, calls) = run_counting(&mut conn, &eager_policy(), |tx| {
        tx.execute("INSERT INTO audit (note) VALUES ('looked up order 7')", [])?;
        Err::<(), _>(OrderError::NotFound(7))
    });
    let err = result.expect_err("the business error");
    assert!(matches!(err.error(), OrderError::NotFound(7)), "{err:?}");
    assert_permanent_once(&err, None);
    assert!(matches!(err.into_error(), OrderError::NotFound(7)));
    assert_eq!(calls, 1);
    assert_eq!(audit_rows(&conn), 0, "the insert was rolled back");
    assert!(conn.is_autocommit());
}

/// `E = anyhow::Error`: the closure's `?` converts rusqlite errors, `bail!` is the business error.
#[test]
fn an_anyhow_business_error_runs_once() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let (result, calls) = run_counting(&mut conn, &eager_policy(), |tx| -> anyhow::Result<()> {
        tx.execute("INSERT INTO audit (note) VALUES ('x')", [])?;
        anyhow::bail!("customer 42 is suspended")
    });
    let err = result.unwrap_err();
    assert_eq!(err.error().to_string(), "customer 42 is suspended");
    assert_eq!(
        err.to_string(),
        "customer 42 is suspended",
        "TxError shows E"
    );
    assert_permanent_once(&err, None);
    assert_eq!(calls, 1);
    assert_eq!(audit_rows(&conn), 0);
}

#[test]
fn a_boxed_business_error_runs_once() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let (result, calls) = run_counting(
        &mut conn,
        &eager_policy(),
        |tx| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            tx.execute("INSERT INTO audit (note) VALUES ('x')", [])?;
            Err("out of stock".into())
        },
    );
    let err = result.unwrap_err();
    assert_eq!(err.error().to_string(), "out of stock");
    assert_permanent_once(&err, None);
    assert_eq!(calls, 1);
    assert_eq!(audit_rows(&conn), 0);
}

/// `QueryReturnedNoRows` is rusqlite's own error with no SQLite code: permanent.
#[test]
fn query_returned_no_rows_runs_once() {
    let db = Db::wal();
    let mut conn = setup(&db);
    let (result, calls) = run_counting(&mut conn, &eager_policy(), |tx| {
        tx.query_row::<String, _, _>("SELECT note FROM audit WHERE id = 99", [], |r| r.get(0))
    });
    let err = result.expect_err("no row");
    assert!(
        matches!(err.error(), rusqlite::Error::QueryReturnedNoRows),
        "{err:?}"
    );
    assert_permanent_once(&err, None);
    assert_eq!(calls, 1);
}

/// The closure's own error whose text mentions a deadlock (but is no driver's phrase) is a
/// business outcome: the default message fallback matches only the drivers' exact phrases,
/// so it runs once and is permanent. (The old loose fallback, "deadlock" anywhere in any
/// case, retried it until the attempts ran out; `MessageFallback::Loose` still does, which
/// the second half shows: the same closure, opted in, runs five times.)
#[test]
fn business_error_mentioning_deadlock_runs_once() {
    #[derive(Debug, thiserror::Error)]
    enum RefundError {
        #[error("refund refused: customer reports a Deadlock at checkout")]
        Refused,
        #[error(transparent)]
        Db(#[from] rusqlite::Error),
    }

    let db = Db::wal();
    let mut conn = setup(&db);
    let five = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::Constant(Duration::ZERO))
        .build()
        .unwrap();
    // The same closure under both policies.
    let refund = |tx: &mut rusqlite::Transaction<'_>| {
        tx.execute("INSERT INTO audit (note) VALUES ('refund 9')", [])?;
        Err::<(), _>(RefundError::Refused)
    };
    let (result, calls) = run_counting(&mut conn, &five, refund);
    let err = result.expect_err("the business error");
    assert!(matches!(err.error(), RefundError::Refused), "{err:?}");
    assert!(err.to_string().contains("Deadlock"), "{err}");
    assert_eq!(calls, 1, "a business error is never retried");
    assert_permanent_once(&err, None);
    assert_eq!(audit_rows(&conn), 0, "the insert was rolled back");
    assert!(conn.is_autocommit());

    // The test can fail: under the loose fallback the same error counts as a deadlock.
    let loose = five
        .to_builder()
        .classifier(Classifier::default().message_fallback(MessageFallback::Loose))
        .build()
        .unwrap();
    let (result, loose_calls) = run_counting(&mut conn, &loose, refund);
    let err = result.expect_err("the business error, five times");
    assert_eq!(loose_calls, 5);
    assert_eq!(
        err.outcome().verdict(),
        Verdict::Transient(txretry::TransientKind::Deadlock)
    );
    assert_eq!(err.outcome().attempts(), 5);
    assert_eq!(err.outcome().stop_reason(), StopReason::AttemptsExhausted);
    assert_eq!(audit_rows(&conn), 0);
}
