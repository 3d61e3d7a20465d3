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

/// SQLite ended the transaction itself (`INSERT OR ROLLBACK` on a conflict the closure took
/// as an answer): its COMMIT fails with "cannot commit - no transaction is active". That is
/// SQLite saying nothing was written, not a COMMIT whose outcome is unknown: permanent,
/// run once, even for an idempotent call (it was judged ambiguous and run again).
#[test]
fn a_commit_sqlite_refused_is_permanent_not_ambiguous() {
    let db = Db::wal();
    let mut conn = db.open();
    conn.batch_execute("CREATE TABLE item (id INTEGER PRIMARY KEY); INSERT INTO item VALUES (1);")
        .unwrap();

    let mut calls = 0;
    let idempotent = txretry::TxOptions::new().idempotent(true);
    let result = txretry::diesel::transaction_with(&mut conn, &retrying(), &idempotent, |conn| {
        calls += 1;
        let inserted = diesel::sql_query("INSERT OR ROLLBACK INTO item VALUES (1)").execute(conn);
        Ok::<_, diesel::result::Error>(inserted.is_ok())
    });

    let err = result.expect_err("SQLite rolled the transaction back");
    assert_eq!(calls, 1, "not run again");
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.phase(), Phase::Commit);
    assert_eq!(outcome.code(), Some(Code::Sqlite(1)));
    assert!(!outcome.may_have_committed());
    // The connection is usable.
    txretry::diesel::transaction(&mut conn, &retrying(), |conn| {
        diesel::sql_query("INSERT INTO item VALUES (2)").execute(conn)
    })
    .unwrap();
}
