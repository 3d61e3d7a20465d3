//! 1205 with `innodb_lock_wait_timeout = 1`: the runner's transaction inserts a row, then
//! waits for a row another session holds and times out. MySQL/MariaDB roll back only the
//! statement that timed out: the transaction stays open with the insert applied. The runner
//! rolls it back before retrying, so after the retry commits the row exists exactly once.

use mysql_async::TxOpts;
use mysql_async::prelude::*;
use tokio::sync::oneshot;
use txretry::{Code, TransientKind, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_wait_timeout_rolls_back_before_retrying() {
    let Some(url) = url("mysql_async::lock_wait_timeout") else {
        return;
    };
    let pool = pool(&url);
    let mut observer = pool.get_conn().await.unwrap();
    let t = table("my_lock_wait");
    let log = table("my_lock_wait_log");
    create_rows(&mut observer, &t, 1).await;
    // No unique key: a second copy of the row would be stored, not rejected.
    create_log(&mut observer, &log).await;

    // B holds row 1 until told to commit.
    let mut b = pool.get_conn().await.unwrap();
    let (locked_tx, locked) = oneshot::channel::<()>();
    let (release_tx, release) = oneshot::channel::<()>();
    let (released_tx, released) = oneshot::channel::<()>();
    let b_table = t.clone();
    tokio::spawn(async move {
        let mut tx = b.start_transaction(TxOpts::default()).await.unwrap();
        tx.query_drop(format!("UPDATE {b_table} SET v = v + 10 WHERE id = 1"))
            .await
            .unwrap();
        locked_tx.send(()).unwrap();
        release.await.unwrap();
        tx.commit().await.unwrap();
        released_tx.send(()).unwrap();
    });
    locked.await.unwrap();

    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let mut release = Some((release_tx, released));
    let mut attempts = 0;
    let mut after_timeout = Vec::new();
    txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        tx.query_drop("SET SESSION innodb_lock_wait_timeout = 1")
            .await?;
        tx.query_drop(format!("INSERT INTO {log} (note) VALUES ('transfer 1')"))
            .await?;
        let updated = tx
            .query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
            .await;
        if let Err(e) = &updated {
            // Still inside the transaction, the insert is still there.
            let visible: Option<i64> = tx
                .query_first(format!("SELECT count(*) FROM {log}"))
                .await?;
            after_timeout.push((errno(e), txretry::classify(e), visible));
            if let Some((release_tx, released)) = release.take() {
                release_tx.send(()).unwrap();
                released.await.unwrap();
            }
        }
        updated
    })
    .await
    .expect("the retry commits");

    assert_eq!(attempts, 2);
    assert_eq!(after_timeout.len(), 1);
    let (errno, classification, visible) = after_timeout[0];
    assert_eq!(errno, Some(1205));
    assert_eq!(
        classification.verdict,
        Verdict::Transient(TransientKind::LockTimeout)
    );
    assert_eq!(classification.code, Some(Code::MySql(1205)));
    assert_eq!(
        visible,
        Some(1),
        "1205 left the transaction open with the insert applied"
    );
    assert_eq!(seen.retried(), vec![classification]);

    assert_eq!(
        count(&mut observer, &log).await,
        1,
        "the inserted row exists exactly once"
    );
    assert_eq!(value(&mut observer, &t, 1).await, 11);
    drop_tables(&mut observer, &[&t, &log]).await;
    drop(observer);
    pool.disconnect().await.unwrap();
}
