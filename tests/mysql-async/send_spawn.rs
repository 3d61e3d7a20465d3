//! The runner's future is `Send`: it can be `tokio::spawn`ed with a closure that owns what
//! it uses.

use std::sync::Arc;

use mysql_async::Pool;
use mysql_async::prelude::*;
use txretry::{RetryPolicy, TxError};

use crate::common::*;

fn assert_send<T: Send>(value: T) -> T {
    value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_future_can_be_spawned() {
    let Some(mut db) = Rows::start("mysql_async::send_spawn", "my_spawn", 1).await else {
        return;
    };
    let t = Arc::new(db.t.clone());

    let mut tasks = Vec::new();
    for i in 1..=4_i64 {
        let (pool, t) = (db.pool.clone(), Arc::clone(&t));
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
    assert_eq!(db.value(1).await, 1 + 2 + 3 + 4);
    db.finish().await;
}

/// A service struct holding the pool and the policy, as applications write it: its method
/// runs the runner over `&self.pool` and `&self.policy`, with an `async move` closure over
/// copied values, and the method's future is spawned from an `Arc` of the service. That it
/// compiles is half the test (the runner's future borrows nothing of `self` but for the
/// call); the other half is a real transfer.
struct Bank {
    pool: Pool,
    policy: RetryPolicy,
    accounts: Arc<str>,
}

impl Bank {
    async fn transfer(
        &self,
        from: i32,
        to: i32,
        amount: i64,
    ) -> Result<i64, TxError<mysql_async::Error>> {
        let accounts = Arc::clone(&self.accounts);
        txretry::mysql_async::transaction(&self.pool, &self.policy, async move |tx| {
            let update = format!("UPDATE {accounts} SET v = v + ? WHERE id = ?");
            tx.exec_drop(&update, (-amount, from)).await?;
            tx.exec_drop(&update, (amount, to)).await?;
            let left: Option<i64> = tx
                .exec_first(format!("SELECT v FROM {accounts} WHERE id = ?"), (from,))
                .await?;
            Ok(left.unwrap_or_default())
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_method_can_be_spawned() {
    let Some(mut db) = Rows::start("mysql_async::send_spawn_service", "my_bank", 2).await else {
        return;
    };
    let t = &db.t;
    db.observer
        .query_drop(format!("UPDATE {t} SET v = 100 WHERE id = 1"))
        .await
        .unwrap();

    let bank = Arc::new(Bank {
        pool: db.pool.clone(),
        policy: RetryPolicy::default(),
        accounts: Arc::from(t.as_str()),
    });
    let task = {
        let bank = Arc::clone(&bank);
        tokio::spawn(assert_send(async move { bank.transfer(1, 2, 30).await }))
    };
    let left = task.await.unwrap().expect("the transfer commits");

    assert_eq!(left, 70);
    assert_eq!(db.value(1).await, 70);
    assert_eq!(db.value(2).await, 30);
    drop(bank);
    db.finish().await;
}
