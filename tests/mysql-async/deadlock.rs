//! 1213: two sessions update two rows in opposite order. InnoDB rolls back the lighter
//! transaction (fewer rows changed and locked), whichever request closed the cycle; the
//! other session changes many rows first, so the runner is the victim, rolls back and
//! retries to completion.

use mysql_async::TxOpts;
use mysql_async::prelude::*;
use tokio::sync::oneshot;
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

    // B: once A holds row 1, change rows 3..=20 (weight) and row 2, then wait for row 1.
    let mut b = pool.get_conn().await.unwrap();
    let b_id = connection_id(&mut b).await;
    let (a_locked_tx, a_locked) = oneshot::channel::<()>();
    let b_table = t.clone();
    let b_waits = format!("UPDATE {t} SET v = v + 10 WHERE id = 1");
    let b_statement = b_waits.clone();
    let session_b = tokio::spawn(async move {
        a_locked.await.unwrap();
        let mut tx = b.start_transaction(TxOpts::default()).await?;
        tx.query_drop(format!("UPDATE {b_table} SET v = v + 10 WHERE id >= 3"))
            .await?;
        tx.query_drop(format!("UPDATE {b_table} SET v = v + 10 WHERE id = 2"))
            .await?;
        tx.query_drop(b_statement).await?;
        tx.commit().await
    });

    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let mut a_locked_tx = Some(a_locked_tx);
    let mut attempts = 0;
    let mut errors_in_closure = Vec::new();
    txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        tx.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
            .await?;
        if let Some(signal) = a_locked_tx.take() {
            signal.send(()).unwrap();
            // B holds row 2 and is (about to be) waiting for row 1.
            wait_for_statement(&mut observer, b_id, &b_waits).await;
        }
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

    session_b
        .await
        .unwrap()
        .expect("session B commits once A was rolled back");
    assert_eq!(attempts, 2);
    assert_eq!(errors_in_closure.len(), 1);
    let (errno, classification) = errors_in_closure[0];
    assert_eq!(errno, Some(1213));
    assert_eq!(
        classification.verdict,
        Verdict::Transient(TransientKind::Deadlock)
    );
    assert_eq!(classification.code, Some(Code::MySql(1213)));
    assert_eq!(retried(&seen), vec![classification]);

    // A's first attempt left nothing behind: each session added exactly once.
    assert_eq!(value(&mut observer, &t, 1).await, 11);
    assert_eq!(value(&mut observer, &t, 2).await, 11);
    drop_tables(&mut observer, &[&t]).await;
    drop(observer);
    pool.disconnect().await.unwrap();
}
