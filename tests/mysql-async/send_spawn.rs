//! The runner's future is `Send`: it can be `tokio::spawn`ed with a closure that owns what
//! it uses.

use std::sync::Arc;

use mysql_async::prelude::*;
use txretry::RetryPolicy;

use crate::common::*;

fn assert_send<T: Send>(value: T) -> T {
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_future_can_be_spawned() {
    let Some(url) = url("mysql_async::send_spawn") else {
        return;
    };
    let pool = pool(&url);
    let mut observer = pool.get_conn().await.unwrap();
    let t = Arc::new(table("my_spawn"));
    create_rows(&mut observer, &t, 1).await;

    let mut tasks = Vec::new();
    for i in 1..=4_i64 {
        let (pool, t) = (pool.clone(), Arc::clone(&t));
        let policy = RetryPolicy::default();
        tasks.push(tokio::spawn(assert_send(async move {
            let t = Arc::clone(&t);
            txretry::mysql_async::transaction(&pool, &policy, async move |tx| {
                tx.exec_drop(format!("UPDATE {t} SET v = v + ? WHERE id = 1"), (i,))
                    .await?;
                tx.query_first::<i64, _>(format!("SELECT v FROM {t} WHERE id = 1"))
                    .await
            })
            .await
        })));
    }
    for task in tasks {
        task.await
            .unwrap()
            .expect("each spawned transaction commits");
    }
    assert_eq!(value(&mut observer, &t, 1).await, 1 + 2 + 3 + 4);
    drop_tables(&mut observer, &[&t]).await;
    drop(observer);
    pool.disconnect().await.unwrap();
}
