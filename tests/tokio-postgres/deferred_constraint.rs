//! A constraint checked at COMMIT (`DEFERRABLE INITIALLY DEFERRED`) fails the COMMIT with
//! the server's own "not committed" answer, 23505: the commit boundary keeps it permanent
//! (not ambiguous), it runs once even on an idempotent call under a policy that retries
//! every kind, and the client stays usable.

use tokio_postgres::error::SqlState;
use txretry::{KindSet, Phase, StopReason, TxOptions, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_unique_violation_at_commit_is_permanent() {
    let Some(url) = url("tokio_postgres::deferred_constraint") else {
        return;
    };
    let mut client = connect(&url).await;
    let t = table("tp_deferred");
    client
        .batch_execute(&format!(
            "CREATE TABLE {t} (id int NOT NULL, UNIQUE (id) DEFERRABLE INITIALLY DEFERRED);
             INSERT INTO {t} VALUES (1);"
        ))
        .await
        .unwrap();

    let (policy, seen) = recording(5);
    let policy = policy.retry_on(KindSet::ALL).build().unwrap();
    let options = TxOptions::new().idempotent(true);
    let mut attempts = 0;
    let err =
        txretry::tokio_postgres::transaction_with(&mut client, &policy, &options, async |tx| {
            attempts += 1;
            // Accepted now, checked at COMMIT.
            tx.execute(&format!("INSERT INTO {t} VALUES (1)"), &[])
                .await
        })
        .await
        .expect_err("the deferred constraint fails the COMMIT");

    assert_eq!(
        err.error().code(),
        Some(&SqlState::UNIQUE_VIOLATION),
        "{err:?}"
    );
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert!(
        !outcome.may_have_committed(),
        "the server said: not committed"
    );
    assert_eq!(outcome.code(), Some(sqlstate("23505")));
    assert_eq!(outcome.phase(), Phase::Commit);
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);
    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty());

    assert!(!client.is_closed());
    let rows: i64 = client
        .query_one(&format!("SELECT count(*) FROM {t}"), &[])
        .await
        .expect("the client is usable")
        .get(0);
    assert_eq!(rows, 1, "nothing was committed");
    drop_tables(&client, &[&t]).await;
}
