//! The runner's future is `Send`: it can be given to `tokio::spawn`.

use std::time::Duration;

use txretry::RetryPolicy;

use crate::common::TempDb;

fn assert_send<T: Send>(_: &T) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_future_can_be_spawned() {
    let db = TempDb::new().await;
    db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, task INTEGER NOT NULL)")
        .await;
    let pool = db.pool(2, Duration::from_secs(5)).await;
    let policy = RetryPolicy::default();

    // The future itself, not only a spawned wrapper, is Send.
    let fut = txretry::sqlx::transaction(&pool, &policy, async |tx| {
        sqlx::query("INSERT INTO t (task) VALUES (-1)")
            .execute(&mut **tx)
            .await
            .map(drop)
    });
    assert_send(&fut);
    fut.await.unwrap();

    // The runner's future borrows nothing from the caller but the closure: it can be
    // spawned directly when the closure owns what it captures (`async move`).
    let handles: Vec<_> = (0..4_i64)
        .map(|task| {
            let label = format!("task {task}");
            tokio::spawn(txretry::sqlx::transaction(
                &pool,
                &policy,
                async move |tx| {
                    sqlx::query("INSERT INTO t (task) VALUES (?)")
                        .bind(task)
                        .execute(&mut **tx)
                        .await?;
                    Ok::<_, sqlx::Error>(label.clone())
                },
            ))
        })
        .collect();
    for (task, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.await.unwrap().unwrap(), format!("task {task}"));
    }
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM t")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 5);
}
