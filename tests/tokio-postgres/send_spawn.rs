//! The runner's future is `Send`: it can be `tokio::spawn`ed with a closure that owns what
//! it uses.

use std::sync::Arc;

use txretry::RetryPolicy;

use crate::common::*;

fn assert_send<T: Send>(value: T) -> T {
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_future_can_be_spawned() {
    let Some(url) = url("tokio_postgres::send_spawn") else {
        return;
    };
    let observer = connect(&url).await;
    let t = Arc::new(table("tp_spawn"));
    create_rows(&observer, &t, 1).await;

    let mut tasks = Vec::new();
    for i in 1..=4_i64 {
        let mut client = connect(&url).await;
        let policy = RetryPolicy::default();
        let t = Arc::clone(&t);
        tasks.push(tokio::spawn(assert_send(async move {
            let t = Arc::clone(&t);
            txretry::tokio_postgres::transaction(&mut client, &policy, async move |tx| {
                let row = tx
                    .query_one(
                        &format!("UPDATE {t} SET v = v + $1 WHERE id = 1 RETURNING v"),
                        &[&i],
                    )
                    .await?;
                Ok::<i64, tokio_postgres::Error>(row.get(0))
            })
            .await
        })));
    }
    for task in tasks {
        task.await
            .unwrap()
            .expect("each spawned transaction commits");
    }
    assert_eq!(value(&observer, &t, 1).await, 1 + 2 + 3 + 4);
    drop_tables(&observer, &[&t]).await;
}
