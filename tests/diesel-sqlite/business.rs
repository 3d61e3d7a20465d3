//! Business errors surface once: the caller's own error, and a unique violation.

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use txretry::{Code, Phase, RetryPolicy, StopReason, TxError, Verdict};

use crate::common::{Db, assert_outcome, scalar};

#[derive(Debug, thiserror::Error)]
enum OrderError {
    #[error("order {0} refused: customer reports a deadlock at checkout")]
    Refused(i64),
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
}

fn retrying() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(5)
        .retry_on(txretry::KindSet::ALL)
        .build()
        .unwrap()
}

#[test]
fn the_callers_own_error_is_returned_once_and_rolled_back() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY)")
        .unwrap();

    let mut calls = 0;
    let result = txretry::diesel::transaction(&mut conn, &retrying(), |conn| {
        calls += 1;
        diesel::sql_query("INSERT INTO item VALUES (17)").execute(conn)?;
        Err::<(), _>(OrderError::Refused(17))
    });

    let err = result.expect_err("refused");
    assert!(matches!(err.error(), OrderError::Refused(17)));
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(
        calls, 1,
        "a business error is not retried, whatever its text"
    );
    assert_eq!(
        scalar(&mut conn, "SELECT count(*) FROM item"),
        0,
        "rolled back"
    );
}

#[test]
fn a_unique_violation_is_returned_once() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY); INSERT INTO item VALUES (1);")
        .unwrap();

    let mut calls = 0;
    let result: Result<(), TxError<diesel::result::Error>> =
        txretry::diesel::transaction(&mut conn, &retrying(), |conn| {
            calls += 1;
            diesel::sql_query("INSERT INTO item VALUES (2)").execute(conn)?;
            diesel::sql_query("INSERT INTO item VALUES (1)").execute(conn)?;
            Ok(())
        });

    let err = result.expect_err("duplicate key");
    assert!(
        matches!(
            err.error(),
            diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UniqueViolation,
                _
            )
        ),
        "{err:?}"
    );
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), Some(Code::Sqlite(19)));
    assert_eq!(calls, 1);
    assert_eq!(
        scalar(&mut conn, "SELECT count(*) FROM item"),
        1,
        "row 2 rolled back"
    );
}
