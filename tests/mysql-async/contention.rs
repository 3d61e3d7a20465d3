//! 16 tasks × 50 transfers between 4 hot accounts at the server's default isolation
//! (REPEATABLE READ), all through one pool. Transfers lock the two rows in either order, so
//! InnoDB deadlocks (1213) happen and are retried: every transfer commits exactly once, the
//! total never changes, and the ledger holds one row per transfer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use mysql_async::prelude::*;
use txretry::{Backoff, Jitter, RetryPolicy};

use crate::common::*;

const TASKS: i32 = 16;
const TRANSFERS: i32 = 50;
const ACCOUNTS: i32 = 4;
const INITIAL: i64 = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_accounts_at_default_isolation() {
    let Some(url) = url("mysql_async::contention") else {
        return;
    };
    let pool = pool(&url);
    let mut observer = pool.get_conn().await.unwrap();
    let accounts = table("my_accounts");
    let ledger = table("my_ledger");
    observer
        .query_drop(format!(
            "CREATE TABLE {accounts} (id int PRIMARY KEY, balance bigint NOT NULL) ENGINE=InnoDB"
        ))
        .await
        .unwrap();
    observer
        .exec_batch(
            format!("INSERT INTO {accounts} VALUES (?, ?)"),
            (1..=ACCOUNTS).map(|id| (id, INITIAL)),
        )
        .await
        .unwrap();
    observer
        .query_drop(format!(
            "CREATE TABLE {ledger} (task int, seq int, src int, dst int, amount bigint,
                                    PRIMARY KEY (task, seq)) ENGINE=InnoDB"
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
    let (accounts, ledger) = (Arc::new(accounts), Arc::new(ledger));

    // The total, read again and again while the transfers run.
    let done = Arc::new(AtomicBool::new(false));
    let monitor = {
        let (done, accounts) = (Arc::clone(&done), Arc::clone(&accounts));
        let mut conn = pool.get_conn().await.unwrap();
        tokio::spawn(async move {
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                let total: Option<i64> = conn
                    .query_first(format!(
                        "SELECT CAST(sum(balance) AS SIGNED) FROM {accounts}"
                    ))
                    .await
                    .unwrap();
                assert_eq!(
                    total,
                    Some(INITIAL * i64::from(ACCOUNTS)),
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
        let (pool, policy) = (pool.clone(), policy.clone());
        let (accounts, ledger) = (Arc::clone(&accounts), Arc::clone(&ledger));
        tasks.push(tokio::spawn(async move {
            for seq in 0..TRANSFERS {
                let src = (task + seq) % ACCOUNTS + 1;
                let dst = (task + 2 * seq + 1) % ACCOUNTS + 1;
                let dst = if dst == src { src % ACCOUNTS + 1 } else { dst };
                let amount = i64::from(seq % 7 + 1);
                let (accounts, ledger) = (Arc::clone(&accounts), Arc::clone(&ledger));
                txretry::mysql_async::transaction(&pool, &policy, async move |tx| {
                    let update =
                        format!("UPDATE {accounts} SET balance = balance + ? WHERE id = ?");
                    tx.exec_drop(&update, (-amount, src)).await?;
                    tx.exec_drop(&update, (amount, dst)).await?;
                    tx.exec_drop(
                        format!("INSERT INTO {ledger} VALUES (?, ?, ?, ?, ?)"),
                        (task, seq, src, dst, amount),
                    )
                    .await
                })
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

    let total: Option<i64> = observer
        .query_first(format!(
            "SELECT CAST(sum(balance) AS SIGNED) FROM {accounts}"
        ))
        .await
        .unwrap();
    assert_eq!(total, Some(INITIAL * i64::from(ACCOUNTS)));
    assert_eq!(
        count(&mut observer, &ledger).await,
        i64::from(TASKS * TRANSFERS),
        "one ledger row per transfer"
    );
    // Every balance is exactly what the ledger says it should be.
    let mismatched: Option<i64> = observer
        .query_first(format!(
            "SELECT count(*) FROM {accounts} a WHERE a.balance <> {INITIAL}
               + coalesce((SELECT sum(amount) FROM {ledger} WHERE dst = a.id), 0)
               - coalesce((SELECT sum(amount) FROM {ledger} WHERE src = a.id), 0)"
        ))
        .await
        .unwrap();
    assert_eq!(mismatched, Some(0));
    let retries = retries.load(Ordering::Relaxed);
    eprintln!(
        "contention: {} transfers, {retries} retries, {reads} total reads",
        TASKS * TRANSFERS
    );
    drop_tables(&mut observer, &[&accounts, &ledger]).await;
    drop(observer);
    pool.disconnect().await.unwrap();
}
