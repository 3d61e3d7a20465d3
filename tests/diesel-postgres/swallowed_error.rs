//! A closure that swallows an error leaves Postgres's transaction aborted, and Postgres
//! answers a plain COMMIT of it by rolling back with no error. The runner's `SELECT 1`
//! before COMMIT fails with 25P02 instead: the call is not reported as committed.

use diesel::prelude::*;
use txretry::{Phase, RetryPolicy, StopReason, TxError, Verdict};

use crate::common::*;

#[test]
fn a_swallowed_error_is_not_reported_as_committed() {
    let Some(url) = url("diesel_postgres::swallowed_error") else {
        return;
    };
    let mut conn = connect(&url);
    let t = table("dpg_swallowed");
    create_rows(&mut conn, &t, 1);

    let mut swallowed = Vec::new();
    let result: Result<(), TxError<diesel::result::Error>> =
        txretry::diesel::transaction(&mut conn, &RetryPolicy::default(), |conn| {
            diesel::sql_query(format!("UPDATE {t} SET v = v + 1 WHERE id = 1")).execute(conn)?;
            // The bug under test: the error is dropped and the closure carries on.
            if let Err(e) =
                diesel::sql_query(format!("INSERT INTO {t} VALUES (1, 0)")).execute(conn)
            {
                swallowed.push(diesel_sqlstate(&e));
            }
            Ok(())
        });

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
