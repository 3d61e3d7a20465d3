//! 55P03: the runner's session sets `lock_timeout` and needs a row another session holds.
//! After the first attempt times out, the other session commits; the retry gets the row.

use tokio::sync::oneshot;
use txretry::{TransientKind, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_timeout_is_classified_and_retried() {
    let Some(url) = url("tokio_postgres::lock_timeout") else {
        return;
    };
    let observer = connect(&url).await;
    let t = table("tp_lock_timeout");
    create_rows(&observer, &t, 1).await;

    // B holds row 1 until told to commit.
    let mut b = connect(&url).await;
    let (locked_tx, locked) = oneshot::channel::<()>();
    let (release_tx, release) = oneshot::channel::<()>();
    let (released_tx, released) = oneshot::channel::<()>();
    let b_table = t.clone();
    tokio::spawn(async move {
        let tx = b.transaction().await.unwrap();
        tx.execute(
            &format!("UPDATE {b_table} SET v = v + 10 WHERE id = 1"),
            &[],
        )
        .await
        .unwrap();
        locked_tx.send(()).unwrap();
        release.await.unwrap();
        tx.commit().await.unwrap();
        released_tx.send(()).unwrap();
    });
    locked.await.unwrap();

    let mut a = connect(&url).await;
    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let mut release = Some((release_tx, released));
    let mut attempts = 0;
    let mut errors_in_closure = Vec::new();
    txretry::tokio_postgres::transaction(&mut a, &policy, async |tx| {
        attempts += 1;
        tx.batch_execute("SET LOCAL lock_timeout = '100ms'").await?;
        let updated = tx
            .execute(&format!("UPDATE {t} SET v = v + 1 WHERE id = 1"), &[])
            .await;
        if let Err(e) = &updated {
            errors_in_closure.push(txretry::classify(e));
            if let Some((release_tx, released)) = release.take() {
                release_tx.send(()).unwrap();
                released.await.unwrap();
            }
        }
        updated.map(drop)
    })
    .await
    .expect("the retry commits");

    assert_eq!(attempts, 2);
    assert_eq!(errors_in_closure.len(), 1);
    assert_eq!(
        errors_in_closure[0].verdict,
        Verdict::Transient(TransientKind::LockTimeout)
    );
    assert_eq!(errors_in_closure[0].code, Some(sqlstate("55P03")));
    assert_eq!(seen.retried(), errors_in_closure);
    assert_eq!(value(&observer, &t, 1).await, 11);
    drop_tables(&observer, &[&t]).await;
}
