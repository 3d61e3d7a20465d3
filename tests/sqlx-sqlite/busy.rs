//! SQLITE_BUSY (5): two writers, busy_timeout 0. The runner retries the whole transaction.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use txretry::{Code, SqliteBegin, TransientKind, TxOptions, Verdict};

use crate::common::{Seen, TempDb, exec, policy, within};

async fn setup(db: &TempDb) {
    db.exec(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL); INSERT INTO t VALUES (1, 0);",
    )
    .await;
}

/// Default runner (`BEGIN IMMEDIATE`) while another connection holds the write lock:
/// BEGIN itself fails with code 5. The other writer commits once the runner has failed;
/// the runner's next attempts go through, after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_at_begin_immediate_is_retried() {
    let db = TempDb::new().await;
    setup(&db).await;
    let pool = db.pool(1, Duration::ZERO).await;

    let mut holder = db.connect().await;
    exec(
        &mut holder,
        "BEGIN IMMEDIATE; UPDATE t SET v = v + 1 WHERE id = 1;",
    )
    .await;

    // The real error, straight from the driver.
    let err = sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&pool)
        .await
        .unwrap_err();
    let c = txretry::classify(&err);
    assert_eq!(c.verdict, Verdict::Transient(TransientKind::Busy), "{err}");
    assert_eq!(c.code, Some(Code::Sqlite(5)));

    let seen = Seen::default();
    let policy = policy(100, &seen);
    let runs = Arc::new(AtomicU32::new(0));
    let runner = tokio::spawn({
        let (pool, runs) = (pool.clone(), runs.clone());
        async move {
            txretry::sqlx::transaction(&pool, &policy, async move |tx| {
                runs.fetch_add(1, Ordering::SeqCst);
                sqlx::query("UPDATE t SET v = v * 10 WHERE id = 1")
                    .execute(&mut **tx)
                    .await?;
                Ok::<_, sqlx::Error>(())
            })
            .await
        }
    });

    seen.first_retry().await;
    exec(&mut holder, "COMMIT").await;
    within(runner).await.unwrap().unwrap();

    // The closure ran only once BEGIN succeeded, i.e. after the holder committed.
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let seen = seen.all();
    assert!(!seen.is_empty());
    for (_, c) in &seen {
        assert_eq!(c.verdict, Verdict::Transient(TransientKind::Busy));
        assert_eq!(c.code, Some(Code::Sqlite(5)));
    }
    let v: i64 = sqlx::query_scalar("SELECT v FROM t WHERE id = 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        v, 10,
        "(0 + 1) * 10: the holder's update, then the runner's, once"
    );
}

/// Two DEFERRED writers: the runner's UPDATE needs the write lock another connection holds
/// and fails with code 5 inside the closure. The closure lets the other writer commit,
/// returns the error, and the second attempt succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_on_write_in_deferred_transaction_is_retried() {
    let db = TempDb::new().await;
    setup(&db).await;
    let pool = db.pool(1, Duration::ZERO).await;

    let mut holder = db.connect().await;
    exec(
        &mut holder,
        "BEGIN IMMEDIATE; UPDATE t SET v = v + 1 WHERE id = 1;",
    )
    .await;

    let seen = Seen::default();
    let policy = policy(5, &seen);
    let options = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    let mut attempts = 0;
    let mut in_closure = None;
    within(txretry::sqlx::transaction_with(
        &pool,
        &policy,
        &options,
        async |tx| {
            attempts += 1;
            let r = sqlx::query("UPDATE t SET v = v * 10 WHERE id = 1")
                .execute(&mut **tx)
                .await;
            if attempts == 1 {
                let err = r.as_ref().expect_err("the holder has the write lock");
                in_closure = Some(txretry::classify(err));
                exec(&mut holder, "COMMIT").await;
            }
            r.map(drop)
        },
    ))
    .await
    .unwrap();

    assert_eq!(attempts, 2);
    let c = in_closure.unwrap();
    assert_eq!(c.verdict, Verdict::Transient(TransientKind::Busy));
    assert_eq!(c.code, Some(Code::Sqlite(5)));
    assert_eq!(seen.all().len(), 1);
    let v: i64 = sqlx::query_scalar("SELECT v FROM t WHERE id = 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(v, 10);
}
