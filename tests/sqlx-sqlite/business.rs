//! A business error inside the closure surfaces once, and its writes are rolled back.

use std::time::Duration;

use txretry::Verdict;

use crate::common::{Seen, TempDb, policy};

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("order {0} not found")]
    NotFound(i64),
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

    assert!(matches!(err, AppError::NotFound(42)), "{err}");
    assert_eq!(calls, 1);
    assert!(seen.all().is_empty());
    let c = txretry::classify(&err);
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(c.code, None);
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM audit")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 0, "the insert before the error was rolled back");
}
