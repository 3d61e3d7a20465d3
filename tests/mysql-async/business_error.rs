//! A business error from the closure surfaces once, unchanged, and what the closure wrote
//! before it is rolled back; the outcome says so (permanent, in the body, one attempt).

use mysql_async::prelude::*;
use txretry::{
    Classifier, KindSet, MessageFallback, RetryPolicy, StopReason, TxError, TxOptions, Verdict,
};

use crate::common::*;

#[derive(Debug, thiserror::Error)]
enum TransferError {
    #[error("insufficient funds: {0} available")]
    InsufficientFunds(i64),
    #[error("transfer refused: the customer reports a Deadlock with their bank")]
    Refused,
    #[error(transparent)]
    Db(#[from] mysql_async::Error),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn business_error_runs_once_and_rolls_back() {
    let Some(mut db) = Rows::start("mysql_async::business_error", "my_business", 1).await else {
        return;
    };
    let t = &db.t;

    // Even a policy that retries every kind, on a call that retries ambiguous failures too,
    // runs it once.
    let policy = txretry::RetryPolicy::builder()
        .max_attempts(5)
        .retry_on(KindSet::ALL)
        .build()
        .unwrap();
    let options = TxOptions::new().idempotent(true);
    let mut attempts = 0;
    let result = txretry::mysql_async::transaction_with(&db.pool, &policy, &options, async |tx| {
        attempts += 1;
        tx.query_drop(format!("UPDATE {t} SET v = v - 100 WHERE id = 1"))
            .await?;
        let balance: i64 = tx
            .query_first(format!("SELECT v FROM {t} WHERE id = 1"))
            .await?
            .unwrap_or(0);
        if balance < 0 {
            return Err(TransferError::InsufficientFunds(balance + 100));
        }
        Ok(())
    })
    .await;

    let err = result.expect_err("insufficient funds");
    assert!(
        matches!(err.error(), TransferError::InsufficientFunds(0)),
        "{err:?}"
    );
    assert_eq!(attempts, 1);
    assert_eq!(
        txretry::classify(err.error()).verdict,
        txretry::Verdict::Permanent
    );
    assert_permanent_once(&err, None);
    assert_eq!(db.value(1).await, 0, "the UPDATE was rolled back");
    db.finish().await;
}

/// Runs, under `policy`, a closure that adds 1 to row 1 of `t` and then refuses the
/// transfer; returns the error and how many times the closure ran.
async fn refuse_after_update(db: &Rows, policy: &RetryPolicy) -> (TxError<TransferError>, u32) {
    let t = &db.t;
    let mut attempts = 0;
    let err = txretry::mysql_async::transaction(&db.pool, policy, async |tx| {
        attempts += 1;
        tx.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
            .await?;
        Err::<(), _>(TransferError::Refused)
    })
    .await
    .expect_err("the business error");
    (err, attempts)
}

/// The closure's own error whose text mentions a deadlock (but is not MariaDB's phrase,
/// "Deadlock found when trying to get lock") is a business outcome: the default message
/// fallback matches only the drivers' exact phrases, so it runs once and is permanent. The
/// old loose fallback ("deadlock" anywhere, any case) retried it until the attempts ran
/// out; `MessageFallback::Loose` still does, which the end of the test shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn business_error_mentioning_deadlock_runs_once() {
    let Some(mut db) = Rows::start(
        "mysql_async::business_error_mentioning_deadlock",
        "my_business_dl",
        1,
    )
    .await
    else {
        return;
    };

    let (policy, seen) = recording(5);
    let policy = policy.build().unwrap();
    let (err, attempts) = refuse_after_update(&db, &policy).await;

    assert!(matches!(err.error(), TransferError::Refused), "{err:?}");
    assert!(err.to_string().contains("Deadlock"), "{err}");
    assert_eq!(attempts, 1, "a business error is never retried");
    assert!(seen.retried().is_empty());
    assert_permanent_once(&err, None);
    assert_eq!(db.value(1).await, 0, "rolled back");

    // The test can fail: with the loose fallback the same error counts as a deadlock.
    let loose = policy
        .to_builder()
        .classifier(Classifier::default().message_fallback(MessageFallback::Loose))
        .build()
        .unwrap();
    let (err, loose_attempts) = refuse_after_update(&db, &loose).await;
    assert_eq!(loose_attempts, 5, "the business error, five times");
    assert_eq!(
        err.outcome().verdict(),
        Verdict::Transient(txretry::TransientKind::Deadlock)
    );
    assert_eq!(err.outcome().stop_reason(), StopReason::AttemptsExhausted);
    assert_eq!(db.value(1).await, 0, "rolled back each time");
    db.finish().await;
}
