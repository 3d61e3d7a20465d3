//! The runner's future is `Send` and borrows nothing but the closure: it can be given to
//! `tokio::spawn` directly.

use txretry::RetryPolicy;

use crate::common::{drop_table, exec, setup, sql, table};

fn assert_send<T: Send>(_: &T) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_future_can_be_spawned() {
    let Some((_, pool)) = setup("sqlx-postgres spawn", 4).await else {
        return;
    };
    let t = table("spawned");
    exec(
        &pool,
        format!("CREATE TABLE {t} (id serial PRIMARY KEY, task bigint NOT NULL)"),
    )
    .await;
    let policy = RetryPolicy::default();

    // The future itself is Send when the closure owns its captures. (Borrowed captures,
    // even a moved reference, defeat rustc's Send proof: rust-lang/rust#110338.)
    let insert = format!("INSERT INTO {t} (task) VALUES (-1)");
    let fut = txretry::sqlx::transaction(&pool, &policy, async move |tx| {
        sqlx::query(sql(insert.clone()))
            .execute(&mut **tx)
            .await
            .map(drop)
    });
    assert_send(&fut);
    fut.await.unwrap();

    let handles: Vec<_> = (0..4_i64)
        .map(|task| {
            // The closure owns what it captures (`async move`).
            let insert = format!("INSERT INTO {t} (task) VALUES ($1) RETURNING task");
            tokio::spawn(txretry::sqlx::transaction(
                &pool,
                &policy,
                async move |tx| {
                    sqlx::query_scalar::<_, i64>(sql(insert.clone()))
                        .bind(task)
                        .fetch_one(&mut **tx)
                        .await
                },
            ))
        })
        .collect();
    for (task, handle) in handles.into_iter().enumerate() {
        assert_eq!(handle.await.unwrap().unwrap(), task as i64);
    }
    let n: i64 = sqlx::query_scalar(sql(format!("SELECT count(*) FROM {t}")))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 5);
    drop_table(&pool, &t).await;
}
