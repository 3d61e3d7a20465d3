//! 1062 (duplicate entry) is permanent: it surfaces once, with its number.

use mysql_async::prelude::*;
use txretry::{Code, Phase, StopReason, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_violation_is_permanent() {
    let Some(url) = url("mysql_async::unique_violation") else {
        return;
    };
    let pool = pool(&url);
    let mut observer = pool.get_conn().await.unwrap();
    let t = table("my_unique");
    create_rows(&mut observer, &t, 1).await;

    let (policy, seen) = recording(5);
    let policy = policy.build().unwrap();
    let mut attempts = 0;
    let err = txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        tx.query_drop(format!("INSERT INTO {t} (id, v) VALUES (2, 0)"))
            .await?;
        tx.query_drop(format!("INSERT INTO {t} (id, v) VALUES (1, 0)"))
            .await
    })
    .await
    .expect_err("duplicate key");

    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty());
    assert_eq!(errno(err.error()), Some(1062));
    let classification = txretry::classify(err.error());
    assert_eq!(classification.verdict, Verdict::Permanent);
    assert_eq!(classification.code, Some(Code::MySql(1062)));
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), Some(Code::MySql(1062)));
    assert_eq!(
        count(&mut observer, &t).await,
        1,
        "the first INSERT was rolled back"
    );
    drop_tables(&mut observer, &[&t]).await;
    drop(observer);
    pool.disconnect().await.unwrap();
}
