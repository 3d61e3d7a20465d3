//! A closure that swallows an error leaves Postgres's transaction aborted, and Postgres
//! answers a plain COMMIT of it by rolling back with no error. The runner's `SELECT 1`
//! before COMMIT fails with 25P02 instead: the call is not reported as committed. Written
//! once for Postgres through Diesel and diesel-async (a `#[path]` module, like
//! `business.rs`).

use txretry::{Phase, RetryPolicy, StopReason, TxError, TxOptions, Verdict};

use crate::calls::*;
use crate::common::*;

#[test]
fn a_swallowed_error_is_not_reported_as_committed() {
    let Some(url) = url(&format!("{BINARY}::swallowed_error")) else {
        return;
    };
    let mut conn = connect(&url);
    let t = table(&format!("{BINARY}_swallowed"));
    create_rows(&mut conn, &t, 1);

    let mut swallowed = Vec::new();
    let result: Result<(), TxError<diesel::result::Error>> = transaction_with!(
        &mut conn,
        &RetryPolicy::default(),
        &TxOptions::default(),
        |conn| {
            execute!(
                diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1")),
                conn
            )?;
            // The bug under test: the error is dropped and the closure carries on.
            if let Err(e) = execute!(
                diesel::sql_query(format!("INSERT INTO {t} VALUES (1, 0)")),
                conn
            ) {
                swallowed.push(diesel_sqlstate(&e));
            }
            Ok(())
        }
    );

    assert_eq!(swallowed, [Some("23505".to_owned())]);
    let err = result.expect_err("the transaction was aborted");
    assert_eq!(
        diesel_sqlstate(err.error()).as_deref(),
        Some("25P02"),
        "{err:?}"
    );
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(value(&mut conn, &t, 1), 0, "nothing committed");
    drop_tables(&mut conn, &[&t]);
}
