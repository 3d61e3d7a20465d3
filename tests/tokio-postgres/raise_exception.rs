//! `RAISE EXCEPTION 'deadlock …'` has SQLSTATE P0001: the typed code wins over the message,
//! so it is permanent although its text says "deadlock".

use txretry::Verdict;

use crate::common::*;

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
        tx.batch_execute("DO $$ BEGIN RAISE EXCEPTION 'deadlock detected in order %', 42; END $$")
            .await
    })
    .await
    .expect_err("the raised exception");

    assert_eq!(attempts, 1);
    assert!(retried(&seen).is_empty());
    let db = err.as_db_error().expect("a server error");
    assert!(db.message().contains("deadlock"), "{}", db.message());
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::RAISE_EXCEPTION)
    );
    let classification = txretry::classify(&err);
    assert_eq!(classification.verdict, Verdict::Permanent);
    assert_eq!(classification.code, Some(sqlstate("P0001")));
}
