//! The runner's future is `Send` and borrows nothing but the closure: it can be given to
//! `tokio::spawn` directly.

use std::sync::Arc;

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

/// A service that keeps its pool and policy, and a method that runs a transfer through
/// the runner: the closure is `async move` over copied values (and a clone of the table
/// name), so the method's future is `Send` and can be spawned from an `Arc<Bank>`.
struct Bank {
    pool: sqlx::PgPool,
    policy: RetryPolicy,
    accounts: String,
}

impl Bank {
    /// Moves `amount` from `from` to `to`; the new balance of `from`.
    async fn transfer(
        &self,
        from: i64,
        to: i64,
        amount: i64,
    ) -> Result<i64, txretry::TxError<sqlx::Error>> {
        let debit = format!(
            "UPDATE {} SET balance = balance - $1 WHERE id = $2 RETURNING balance",
            self.accounts
        );
        let credit = format!(
            "UPDATE {} SET balance = balance + $1 WHERE id = $2",
            self.accounts
        );
        txretry::sqlx::transaction(&self.pool, &self.policy, async move |tx| {
            let balance: i64 = sqlx::query_scalar(sql(debit.clone()))
                .bind(amount)
                .bind(from)
                .fetch_one(&mut **tx)
                .await?;
            sqlx::query(sql(credit.clone()))
                .bind(amount)
                .bind(to)
                .execute(&mut **tx)
                .await?;
            Ok(balance)
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_method_future_can_be_spawned() {
    let Some((_, pool)) = setup("sqlx-postgres spawn service", 4).await else {
        return;
    };
    let t = table("bank");
    exec(
        &pool,
        format!(
            "CREATE TABLE {t} (id bigint PRIMARY KEY, balance bigint NOT NULL);
             INSERT INTO {t} VALUES (1, 100), (2, 100)"
        ),
    )
    .await;
    let bank = Arc::new(Bank {
        pool: pool.clone(),
        policy: RetryPolicy::builder().max_attempts(10).build().unwrap(),
        accounts: t.clone(),
    });

    let fut = {
        let bank = Arc::clone(&bank);
        async move { bank.transfer(1, 2, 30).await }
    };
    assert_send(&fut);
    assert_eq!(tokio::spawn(fut).await.unwrap().unwrap(), 70);

    // Concurrent transfers, each spawned from its own handle on the service.
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let bank = Arc::clone(&bank);
            tokio::spawn(async move { bank.transfer(2, 1, 5).await })
        })
        .collect();
    let mut after: Vec<i64> = Vec::new();
    for handle in handles {
        after.push(handle.await.unwrap().unwrap());
    }
    after.sort_unstable();
    assert_eq!(
        after,
        [100, 105, 110, 115, 120, 125],
        "one debit after another"
    );
    let balances: Vec<i64> =
        sqlx::query_scalar(sql(format!("SELECT balance FROM {t} ORDER BY id")))
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(balances, [100, 100], "each transfer applied once");
    drop_table(&pool, &t).await;
}
