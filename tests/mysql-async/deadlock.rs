//! 1213: two sessions update two rows in opposite order. InnoDB rolls back the lighter
//! transaction (fewer rows changed and locked), whichever request closed the cycle; the
//! other session changes many rows first, so the runner is the victim, rolls back and
//! retries to completion.

use mysql_async::prelude::*;
use txretry::{Code, TransientKind, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlock_is_classified_and_retried() {
    let Some(url) = url("mysql_async::deadlock") else {
        return;
    };
    let pool = pool(&url);
    let mut observer = pool.get_conn().await.unwrap();
    let t = table("my_deadlock");
    create_rows(&mut observer, &t, 20).await;

    let mut deadlock = Deadlock::stage(&pool, &t).await;

    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let mut attempts = 0;
    let mut errors_in_closure = Vec::new();
    txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        tx.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
            .await?;
        deadlock.a_holds_row_1(&mut observer).await;
        let updated = tx
            .query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 2"))
            .await;
        if let Err(e) = &updated {
            errors_in_closure.push((errno(e), txretry::classify(e)));
        }
        updated
    })
    .await
    .expect("the retry commits");

    deadlock.b_commits().await;
    assert_eq!(attempts, 2);
    assert_eq!(errors_in_closure.len(), 1);
    let (errno, classification) = errors_in_closure[0];
    assert_eq!(errno, Some(1213));
    assert_eq!(
        classification.verdict,
        Verdict::Transient(TransientKind::Deadlock)
    );
    assert_eq!(classification.code, Some(Code::MySql(1213)));
    assert_eq!(seen.retried(), vec![classification]);

    // A's first attempt left nothing behind: each session added exactly once.
    assert_eq!(value(&mut observer, &t, 1).await, 11);
    assert_eq!(value(&mut observer, &t, 2).await, 11);
    drop_tables(&mut observer, &[&t]).await;
    drop(observer);
    pool.disconnect().await.unwrap();
}
