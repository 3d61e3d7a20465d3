//! 16 tasks × 50 transfers between 4 hot accounts on a temp-file WAL database. Every
//! transfer commits exactly once, the sum of balances never changes, the ledger has one row
//! per transfer.
//!
//! DEFERRED runs with busy_timeout 0 (a busy timeout cannot cure its failures anyway:
//! a reader that wants to write gets BUSY / BUSY_SNAPSHOT at once). IMMEDIATE runs with a
//! short busy timeout, as it would in production: writers mostly queue in SQLite, and the
//! runner retries the BEGINs that still time out.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use txretry::{SqliteBegin, TxOptions, Verdict};

use crate::common::{Seen, TempDb, policy, within};

const TASKS: i64 = 16;
const TRANSFERS: i64 = 50;
const ACCOUNTS: i64 = 4;
const START: i64 = 1000;

async fn contention(begin: SqliteBegin, busy_timeout: Duration) {
    let db = TempDb::new().await;
    db.exec(
        "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL);
         CREATE TABLE ledger (id INTEGER PRIMARY KEY, task INTEGER NOT NULL, seq INTEGER NOT NULL,
                              src INTEGER NOT NULL, dst INTEGER NOT NULL, amount INTEGER NOT NULL,
                              UNIQUE (task, seq));
         INSERT INTO accounts VALUES (0, 1000), (1, 1000), (2, 1000), (3, 1000);",
    )
    .await;
    let pool = db.pool(8, busy_timeout).await;
    let seen = Seen::default();
    let policy = policy(100, &seen);
    let options = TxOptions::new().sqlite_begin(begin);
    let attempts = Arc::new(AtomicU32::new(0));

    // A reader checks the invariant while the writers run (read-only, DEFERRED).
    let done = Arc::new(AtomicBool::new(false));
    let reader = tokio::spawn({
        let (pool, policy, done) = (
            db.pool(1, Duration::ZERO).await,
            policy.clone(),
            done.clone(),
        );
        async move {
            let read_only = TxOptions::new()
                .sqlite_begin(SqliteBegin::Deferred)
                .read_only(true);
            let mut checks = 0;
            while !done.load(Ordering::SeqCst) {
                let sum: i64 =
                    txretry::sqlx::transaction_with(&pool, &policy, &read_only, async |tx| {
                        sqlx::query_scalar("SELECT sum(balance) FROM accounts")
                            .fetch_one(&mut **tx)
                            .await
                    })
                    .await
                    .unwrap();
                assert_eq!(sum, ACCOUNTS * START, "the sum changed mid-run");
                checks += 1;
                tokio::task::yield_now().await;
            }
            checks
        }
    });

    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let (pool, policy, options, attempts) = (
            pool.clone(),
            policy.clone(),
            options.clone(),
            attempts.clone(),
        );
        tasks.spawn(async move {
            for seq in 0..TRANSFERS {
                let src = (task + seq) % ACCOUNTS;
                let dst = (src + 1 + seq % 3) % ACCOUNTS;
                let amount = 1 + (task * 7 + seq) % 13;
                let attempts = attempts.clone();
                txretry::sqlx::transaction_with(&pool, &policy, &options, async move |tx| {
                    attempts.fetch_add(1, Ordering::Relaxed);
                    // Read-modify-write: a lost update would show in the sum.
                    let balance: i64 =
                        sqlx::query_scalar("SELECT balance FROM accounts WHERE id = ?")
                            .bind(src)
                            .fetch_one(&mut **tx)
                            .await?;
                    sqlx::query("UPDATE accounts SET balance = ? WHERE id = ?")
                        .bind(balance - amount)
                        .bind(src)
                        .execute(&mut **tx)
                        .await?;
                    sqlx::query("UPDATE accounts SET balance = balance + ? WHERE id = ?")
                        .bind(amount)
                        .bind(dst)
                        .execute(&mut **tx)
                        .await?;
                    sqlx::query(
                        "INSERT INTO ledger (task, seq, src, dst, amount) VALUES (?, ?, ?, ?, ?)",
                    )
                    .bind(task)
                    .bind(seq)
                    .bind(src)
                    .bind(dst)
                    .bind(amount)
                    .execute(&mut **tx)
                    .await?;
                    Ok::<_, sqlx::Error>(())
                })
                .await
                .unwrap_or_else(|e| panic!("transfer {task}/{seq} failed: {e}"));
            }
        });
    }
    within(async {
        while let Some(joined) = tasks.join_next().await {
            joined.unwrap();
        }
    })
    .await;
    done.store(true, Ordering::SeqCst);
    let checks = within(reader).await.unwrap();

    let sum: i64 = sqlx::query_scalar("SELECT sum(balance) FROM accounts")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(sum, ACCOUNTS * START);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM ledger")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, TASKS * TRANSFERS, "one ledger row per transfer");
    // Every balance is what its ledger rows say: each transfer applied exactly once.
    let mismatched: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM accounts a WHERE a.balance != 1000
           - (SELECT coalesce(sum(amount), 0) FROM ledger WHERE src = a.id)
           + (SELECT coalesce(sum(amount), 0) FROM ledger WHERE dst = a.id)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(mismatched, 0);
    let seen = seen.all();
    for (_, c) in &seen {
        assert!(matches!(c.verdict, Verdict::Transient(_)), "{c:?}");
    }
    eprintln!(
        "sqlite {begin:?}: {} transfers, {} closure runs, {} retries (longest run of failures: {}), {checks} invariant checks",
        TASKS * TRANSFERS,
        attempts.load(Ordering::Relaxed),
        seen.len(),
        seen.iter().map(|(attempt, _)| *attempt).max().unwrap_or(0),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_deferred() {
    contention(SqliteBegin::Deferred, Duration::ZERO).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_immediate() {
    contention(SqliteBegin::Immediate, Duration::from_millis(5)).await;
}
