//! Business errors surface once: a unique violation, and the caller's own error whose
//! text mentions a deadlock. Written once for Postgres and MySQL/MariaDB, blocking Diesel
//! and diesel-async: a `#[path]` module of the four binaries, whose `common` modules name
//! the same helpers (each for its connection type) and say how the server reports a
//! duplicate key (`UNIQUE_VIOLATION`), and whose `calls` modules say how the runner is
//! called.

use txretry::{Code, KindSet, RetryPolicy, SqlState, TxError, TxOptions};
use txretry_testkit::outcome::assert_permanent_once;

use crate::calls::*;
use crate::common::*;

fn retry_everything() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(5)
        .retry_on(KindSet::ALL)
        .build()
        .unwrap()
}

#[test]
fn a_unique_violation_is_returned_once() {
    let Some(url) = url(&format!("{BINARY}::unique")) else {
        return;
    };
    let mut conn = connect(&url);
    let t = table(&format!("{BINARY}_unique"));
    create_rows(&mut conn, &t, 1);

    let mut attempts = 0;
    let result: Result<(), TxError<diesel::result::Error>> = transaction_with!(
        &mut conn,
        &retry_everything(),
        &TxOptions::default(),
        |conn| {
            attempts += 1;
            execute!(
                diesel::sql_query(format!("INSERT INTO {t} VALUES (2, 0)")),
                conn
            )?;
            execute!(
                diesel::sql_query(format!("INSERT INTO {t} VALUES (1, 0)")),
                conn
            )?;
            Ok(())
        }
    );

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
    assert_permanent_once(err.outcome());
    assert_eq!(
        err.outcome().code(),
        Some(Code::SqlState(SqlState::new(UNIQUE_VIOLATION).unwrap()))
    );
    assert_eq!(attempts, 1);
    assert_eq!(count(&mut conn, &t, "1 = 1"), 1, "row 2 rolled back");
    drop_tables(&mut conn, &[&t]);
}

#[derive(Debug, thiserror::Error)]
enum RefundError {
    #[error("refund {0} refused: customer reports a deadlock at checkout")]
    Refused(i32),
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
}

#[test]
fn the_callers_own_error_is_returned_once_whatever_its_text() {
    let Some(url) = url(&format!("{BINARY}::business")) else {
        return;
    };
    let mut conn = connect(&url);
    let t = table(&format!("{BINARY}_business"));
    create_rows(&mut conn, &t, 1);

    let mut attempts = 0;
    let result = transaction_with!(
        &mut conn,
        &retry_everything(),
        &TxOptions::default(),
        |conn| {
            attempts += 1;
            execute!(
                diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1")),
                conn
            )?;
            Err::<(), _>(RefundError::Refused(17))
        }
    );

    let err = result.expect_err("refused");
    assert!(matches!(err.error(), RefundError::Refused(17)));
    assert_permanent_once(err.outcome());
    assert_eq!(attempts, 1);
    assert_eq!(value(&mut conn, &t, 1), 0, "rolled back");
    drop_tables(&mut conn, &[&t]);
}

/// A closure that returns `Ok` with a nested transaction still open (a savepoint begun by
/// hand; in diesel-async, a `conn.transaction` whose future a timeout dropped): COMMIT
/// would only release the savepoint, and the runner said `Ok` with nothing committed. It
/// now rolls every level back and fails, permanently, naming what was left open; and a
/// closure that fails with one open leaves no transaction behind either.
#[test]
fn a_nested_transaction_left_open_commits_nothing_and_says_so() {
    let Some(url) = url(&format!("{BINARY}::nested_open")) else {
        return;
    };
    let mut conn = connect(&url);
    let t = table(&format!("{BINARY}_nested_open"));
    create_rows(&mut conn, &t, 1);

    let mut attempts = 0;
    let result: Result<(), TxError<diesel::result::Error>> = transaction_with!(
        &mut conn,
        &retry_everything(),
        &TxOptions::default(),
        |conn| {
            attempts += 1;
            execute!(
                diesel::sql_query(format!("INSERT INTO {t} VALUES (2, 0)")),
                conn
            )?;
            begin_nested!(conn)?;
            Ok(())
        }
    );
    let err = result.expect_err("nothing was committed");
    let diesel::result::Error::QueryBuilderError(left_open) = err.error() else {
        panic!("{err:?}");
    };
    let left_open = left_open
        .downcast_ref::<txretry::diesel::NestedTransactionLeftOpen>()
        .unwrap_or_else(|| panic!("{err:?}"));
    assert_eq!(left_open.levels, 1);
    assert_permanent_once(err.outcome());
    assert_eq!(attempts, 1);
    assert_eq!(depth!(&mut conn), 0, "no transaction left open");
    assert_eq!(count(&mut conn, &t, "1 = 1"), 1, "row 2 rolled back");

    // Failing with a nested transaction open: every level is rolled back too.
    let result: Result<(), TxError<RefundError>> = transaction_with!(
        &mut conn,
        &retry_everything(),
        &TxOptions::default(),
        |conn| {
            execute!(
                diesel::sql_query(format!("INSERT INTO {t} VALUES (3, 0)")),
                conn
            )?;
            begin_nested!(conn)?;
            Err(RefundError::Refused(3))
        }
    );
    assert!(matches!(result, Err(e) if matches!(e.error(), RefundError::Refused(3))));
    assert_eq!(depth!(&mut conn), 0, "no transaction left open");

    // The connection runs the next call as a transaction of its own, which commits.
    let result: Result<(), TxError<diesel::result::Error>> = transaction_with!(
        &mut conn,
        &retry_everything(),
        &TxOptions::default(),
        |conn| {
            execute!(
                diesel::sql_query(format!("INSERT INTO {t} VALUES (4, 0)")),
                conn
            )?;
            Ok(())
        }
    );
    result.expect("commits");
    let mut other = connect(&url);
    assert_eq!(
        count(&mut other, &t, "1 = 1"),
        2,
        "rows 1 and 4, seen elsewhere"
    );
    drop_tables(&mut conn, &[&t]);
}
