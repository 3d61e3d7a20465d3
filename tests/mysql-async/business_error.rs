//! A business error from the closure surfaces once, unchanged, and what the closure wrote
//! before it is rolled back.

use mysql_async::prelude::*;

use crate::common::*;

#[derive(Debug, thiserror::Error)]
enum TransferError {
    #[error("insufficient funds: {0} available")]
    InsufficientFunds(i64),
    #[error(transparent)]
    Db(#[from] mysql_async::Error),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn business_error_runs_once_and_rolls_back() {
    let Some(url) = url("mysql_async::business_error") else {
        return;
    };
    let pool = pool(&url);
    let mut observer = pool.get_conn().await.unwrap();
    let t = table("my_business");
    create_rows(&mut observer, &t, 1).await;

    // Even a policy that retries every kind, ambiguous failures included, runs it once.
    let policy = txretry::RetryPolicy::builder()
        .max_attempts(5)
        .retry_on(txretry::KindSet::ALL)
        .idempotent(true)
        .build()
        .unwrap();
    let mut attempts = 0;
    let result = txretry::mysql_async::transaction(&pool, &policy, async |tx| {
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

    assert!(
        matches!(result, Err(TransferError::InsufficientFunds(0))),
        "{result:?}"
    );
    assert_eq!(attempts, 1);
    assert_eq!(
        txretry::classify(&result.unwrap_err()).verdict,
        txretry::Verdict::Permanent
    );
    assert_eq!(
        value(&mut observer, &t, 1).await,
        0,
        "the UPDATE was rolled back"
    );
    drop_tables(&mut observer, &[&t]).await;
    drop(observer);
    pool.disconnect().await.unwrap();
}
