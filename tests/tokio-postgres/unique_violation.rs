//! 23505 unique_violation is permanent: it surfaces once, with its code.

use txretry::{Phase, StopReason, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_violation_is_permanent() {
    let Some(url) = url("tokio_postgres::unique_violation") else {
        return;
    };
    let mut client = connect(&url).await;
    let t = table("tp_unique");
    create_rows(&client, &t, 1).await;

    let (policy, seen) = recording(5);
    let policy = policy.build().unwrap();
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        attempts += 1;
        tx.execute(&format!("INSERT INTO {t} (id, v) VALUES (2, 0)"), &[])
            .await?;
        tx.execute(&format!("INSERT INTO {t} (id, v) VALUES (1, 0)"), &[])
            .await
    })
    .await
    .expect_err("duplicate key");

    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty());
    assert_eq!(
        err.error().code(),
        Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
    );
    let classification = txretry::classify(err.error());
    assert_eq!(classification.verdict, Verdict::Permanent);
    assert_eq!(classification.code, Some(sqlstate("23505")));
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.code(), Some(sqlstate("23505")));
    assert_eq!(outcome.phase(), Phase::Body);
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);
    let rows: i64 = client
        .query_one(&format!("SELECT count(*) FROM {t}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 1, "the first INSERT was rolled back");
    drop_tables(&client, &[&t]).await;
}
