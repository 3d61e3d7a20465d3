//! A business error inside the closure surfaces once, and its writes are rolled back —
//! even when its text mentions a deadlock.

use std::time::Duration;

use txretry::{KindSet, Verdict};

use crate::common::{Seen, TempDb, assert_permanent_once, policy};

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("order {0} not found")]
    NotFound(i64),
    #[error("refund {0} refused: customer reports a deadlock at checkout")]
    RefundRefused(i64),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

#[tokio::test]
async fn business_error_runs_once_and_rolls_back() {
    let db = TempDb::new().await;
    db.exec("CREATE TABLE audit (id INTEGER PRIMARY KEY, what TEXT NOT NULL)")
        .await;
    let pool = db.pool(2, Duration::ZERO).await;

    let seen = Seen::default();
    let policy = policy(10, &seen);
    let mut calls = 0;
    let err = txretry::sqlx::transaction(&pool, &policy, async |tx| {
        calls += 1;
        sqlx::query("INSERT INTO audit (what) VALUES ('looked up')")
            .execute(&mut **tx)
            .await?;
        Err::<(), _>(AppError::NotFound(42))
    })
    .await
    .unwrap_err();

    assert!(matches!(err.error(), AppError::NotFound(42)), "{err:?}");
    assert_eq!(err.to_string(), "order 42 not found", "transparent Display");
    assert_eq!(calls, 1);
    assert!(seen.all().is_empty());
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), None);
    let c = txretry::classify(err.error());
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(c.code, None);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM audit")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "the insert before the error was rolled back");
}

/// The word "deadlock" in the application's own error text is not a database's failure:
/// no typed code, no driver phrase, so a policy retrying every kind runs it once.
#[tokio::test]
async fn business_error_mentioning_deadlock_runs_once() {
    let db = TempDb::new().await;
    db.exec("CREATE TABLE refunds (id INTEGER PRIMARY KEY, what TEXT NOT NULL)")
        .await;
    let pool = db.pool(2, Duration::ZERO).await;

    let seen = Seen::default();
    let policy = policy(5, &seen)
        .to_builder()
        .retry_on(KindSet::ALL)
        .build()
        .unwrap();
    let mut calls = 0;
    let err = txretry::sqlx::transaction(&pool, &policy, async |tx| {
        calls += 1;
        sqlx::query("INSERT INTO refunds (what) VALUES ('refund 17')")
            .execute(&mut **tx)
            .await?;
        Err::<(), _>(AppError::RefundRefused(17))
    })
    .await
    .expect_err("the refund is refused");

    assert!(
        matches!(err.error(), AppError::RefundRefused(17)),
        "{err:?}"
    );
    assert!(err.to_string().contains("deadlock"), "{err}");
    assert_eq!(
        calls,
        1,
        "a business error is not retried: {:?}",
        seen.all()
    );
    assert!(seen.all().is_empty());
    assert_permanent_once(err.outcome());
    assert_eq!(err.outcome().code(), None);
    assert_eq!(txretry::classify(err.error()).verdict, Verdict::Permanent);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM refunds")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "the insert before the error was rolled back");
}
