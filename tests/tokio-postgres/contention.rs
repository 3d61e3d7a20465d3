//! 16 tasks × 50 transfers between 4 hot accounts under SERIALIZABLE, each task on its own
//! client: every transfer commits exactly once, the total never changes, and the ledger
//! holds one row per transfer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use txretry::{Backoff, Isolation, Jitter, RetryPolicy, TxOptions};

use crate::common::*;

const TASKS: i32 = 16;
const TRANSFERS: i32 = 50;
const ACCOUNTS: i32 = 4;
const INITIAL: i64 = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_accounts_under_serializable() {
    let Some(url) = url("tokio_postgres::contention") else {
        return;
    };
    let observer = connect(&url).await;
    let accounts = table("tp_accounts");
    let ledger = table("tp_ledger");
    observer
        .batch_execute(&format!(
            "CREATE TABLE {accounts} (id int PRIMARY KEY, balance bigint NOT NULL);
             INSERT INTO {accounts} SELECT g, {INITIAL} FROM generate_series(1, {ACCOUNTS}) g;
             CREATE TABLE {ledger} (task int, seq int, src int, dst int, amount bigint,
                                    PRIMARY KEY (task, seq));"
        ))
        .await
        .unwrap();

    let retries = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&retries);
    let policy = RetryPolicy::builder()
        .max_attempts(100)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(2),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(100))
        .jitter(Jitter::Full)
        .on_retry(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
        })
        .build()
        .unwrap();
    let options = TxOptions::new().isolation(Isolation::Serializable);
    let (accounts, ledger) = (Arc::new(accounts), Arc::new(ledger));

    // The total, read again and again while the transfers run.
    let done = Arc::new(AtomicBool::new(false));
    let monitor = {
        let (done, accounts) = (Arc::clone(&done), Arc::clone(&accounts));
        let client = connect(&url).await;
        tokio::spawn(async move {
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                let total: i64 = client
                    .query_one(&format!("SELECT sum(balance)::bigint FROM {accounts}"), &[])
                    .await
                    .unwrap()
                    .get(0);
                assert_eq!(
                    total,
                    INITIAL * i64::from(ACCOUNTS),
                    "the total changed mid-run"
                );
                reads += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            reads
        })
    };

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let mut client = connect(&url).await;
        let (policy, options) = (policy.clone(), options.clone());
        let (accounts, ledger) = (Arc::clone(&accounts), Arc::clone(&ledger));
        tasks.push(tokio::spawn(async move {
            for seq in 0..TRANSFERS {
                let src = (task + seq) % ACCOUNTS + 1;
                let dst = (task + 2 * seq + 1) % ACCOUNTS + 1;
                let dst = if dst == src { src % ACCOUNTS + 1 } else { dst };
                let amount = i64::from(seq % 7 + 1);
                // Rows are locked in id order, as a careful transfer does: the collisions
                // are then serialization failures (40001), not deadlocks, which Postgres
                // only detects after `deadlock_timeout` (1 s).
                let (low, high) = (src.min(dst), src.max(dst));
                let low_delta = if low == src { -amount } else { amount };
                let (accounts, ledger) = (Arc::clone(&accounts), Arc::clone(&ledger));
                txretry::tokio_postgres::transaction_with(
                    &mut client,
                    &policy,
                    &options,
                    async move |tx| {
                        let update =
                            format!("UPDATE {accounts} SET balance = balance + $1 WHERE id = $2");
                        tx.execute(&update, &[&low_delta, &low]).await?;
                        tx.execute(&update, &[&-low_delta, &high]).await?;
                        tx.execute(
                            &format!("INSERT INTO {ledger} VALUES ($1, $2, $3, $4, $5)"),
                            &[&task, &seq, &src, &dst, &amount],
                        )
                        .await
                    },
                )
                .await
                .expect("every transfer commits");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let reads = monitor.await.unwrap();

    let total: i64 = observer
        .query_one(&format!("SELECT sum(balance)::bigint FROM {accounts}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(total, INITIAL * i64::from(ACCOUNTS));
    let rows: i64 = observer
        .query_one(&format!("SELECT count(*) FROM {ledger}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        rows,
        i64::from(TASKS * TRANSFERS),
        "one ledger row per transfer"
    );
    // Every balance is exactly what the ledger says it should be.
    let mismatched: i64 = observer
        .query_one(
            &format!(
                "SELECT count(*) FROM {accounts} a WHERE a.balance <> {INITIAL}
                   + coalesce((SELECT sum(amount) FROM {ledger} WHERE dst = a.id), 0)
                   - coalesce((SELECT sum(amount) FROM {ledger} WHERE src = a.id), 0)"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(mismatched, 0);
    let retries = retries.load(Ordering::Relaxed);
    eprintln!(
        "contention: {} transfers, {retries} retries, {reads} total reads",
        TASKS * TRANSFERS
    );
    assert!(
        retries > 0,
        "16 sessions on 4 rows under SERIALIZABLE must collide"
    );
    drop_tables(&observer, &[&accounts, &ledger]).await;
}
