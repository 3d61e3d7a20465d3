//! `RAISE EXCEPTION 'deadlock …'` has SQLSTATE P0001: the typed code wins over the message,
//! so it is permanent although its text says "deadlock detected". (Wrapped in the user's
//! error types deeper than the classifier looks: see business_error.rs.)

use txretry::{Phase, StopReason, Verdict};

use crate::common::*;

pub const RAISE: &str = "DO $$ BEGIN RAISE EXCEPTION 'deadlock detected in order %', 17; END $$";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raised_deadlock_message_is_permanent() {
    let Some(url) = url("tokio_postgres::raise_exception") else {
        return;
    };
    let mut client = connect(&url).await;

    let (policy, seen) = recording(5);
    let policy = policy.build().unwrap();
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        attempts += 1;
        tx.batch_execute(RAISE).await
    })
    .await
    .expect_err("the raised exception");

    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty());
    let db = err.error().as_db_error().expect("a server error");
    assert_eq!(db.message(), "deadlock detected in order 17");
    assert_eq!(
        err.error().code(),
        Some(&tokio_postgres::error::SqlState::RAISE_EXCEPTION)
    );
    let classification = txretry::classify(err.error());
    assert_eq!(classification.verdict, Verdict::Permanent);
    assert_eq!(classification.code, Some(sqlstate("P0001")));

    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.code(), Some(sqlstate("P0001")));
    assert_eq!(outcome.phase(), Phase::Body);
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);
}
