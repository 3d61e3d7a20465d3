//! 16 tasks × 50 transfers between 4 hot accounts under SERIALIZABLE. Every transfer commits
//! exactly once, the sum of balances never changes (checked while the transfers run and at
//! the end), the ledger has one row per transfer and explains every balance.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use txretry::{Isolation, TransientKind, TxOptions, Verdict};

use crate::common::{Seen, drop_table, exec, policy_capped, setup, sql, table, within};

const TASKS: i64 = 16;
const TRANSFERS: i64 = 50;
const ACCOUNTS: i64 = 4;
const START: i64 = 1000;
const MAX_DELAY_MS: u64 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_serializable() {
    let Some((_, pool)) = setup("sqlx-postgres contention", 8).await else {
        return;
    };
    let (accounts, ledger) = (table("accounts"), table("ledger"));
    exec(
        &pool,
        format!(
            "CREATE TABLE {accounts} (id bigint PRIMARY KEY, balance bigint NOT NULL);
             INSERT INTO {accounts} SELECT g, {START} FROM generate_series(0, {last}) g;
             CREATE TABLE {ledger} (id bigserial PRIMARY KEY, task bigint NOT NULL, seq bigint NOT NULL,
                                    src bigint NOT NULL, dst bigint NOT NULL, amount bigint NOT NULL,
                                    UNIQUE (task, seq));",
            last = ACCOUNTS - 1
        ),
    )
    .await;

    let seen = Seen::default();
    let policy = policy_capped(100, Duration::from_millis(MAX_DELAY_MS), &seen);
    let options = TxOptions::new().isolation(Isolation::Serializable);
    let runs = Arc::new(AtomicU32::new(0));

    // A reader checks the invariant while the writers run.
    let done = Arc::new(AtomicBool::new(false));
    let reader = tokio::spawn({
        let (pool, policy, done, accounts) =
            (pool.clone(), policy.clone(), done.clone(), accounts.clone());
        async move {
            let snapshot = TxOptions::new()
                .isolation(Isolation::RepeatableRead)
                .read_only(true);
            let mut checks = 0;
            while !done.load(Ordering::SeqCst) {
                // Closures in a spawned task own their captures (see the runner's docs).
                let select = format!("SELECT sum(balance)::bigint FROM {accounts}");
                let sum: i64 =
                    txretry::sqlx::transaction_with(&pool, &policy, &snapshot, async move |tx| {
                        sqlx::query_scalar(sql(select.clone()))
                            .fetch_one(&mut **tx)
                            .await
                    })
                    .await
                    .unwrap();
                assert_eq!(sum, ACCOUNTS * START, "the sum changed mid-run");
                checks += 1;
            }
            checks
        }
    });

    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let (pool, policy, options, runs) =
            (pool.clone(), policy.clone(), options.clone(), runs.clone());
        let (accounts, ledger) = (accounts.clone(), ledger.clone());
        tasks.spawn(async move {
            for seq in 0..TRANSFERS {
                let src = (task + seq) % ACCOUNTS;
                let dst = (src + 1 + seq % 3) % ACCOUNTS;
                let amount = 1 + (task * 7 + seq) % 13;
                let (accounts, ledger, runs) = (accounts.clone(), ledger.clone(), runs.clone());
                txretry::sqlx::transaction_with(&pool, &policy, &options, async move |tx| {
                    runs.fetch_add(1, Ordering::Relaxed);
                    // Transfers lock their two rows in either order, so they also deadlock;
                    // detect that in 20 ms rather than the default 1 s.
                    sqlx::query("SET LOCAL deadlock_timeout = '20ms'").execute(&mut **tx).await?;
                    // Read-modify-write: a lost update would show in the sum.
                    let balance: i64 = sqlx::query_scalar(sql(format!("SELECT balance FROM {accounts} WHERE id = $1")))
                        .bind(src)
                        .fetch_one(&mut **tx)
                        .await?;
                    sqlx::query(sql(format!("UPDATE {accounts} SET balance = $1 WHERE id = $2")))
                        .bind(balance - amount)
                        .bind(src)
                        .execute(&mut **tx)
                        .await?;
                    sqlx::query(sql(format!("UPDATE {accounts} SET balance = balance + $1 WHERE id = $2")))
                        .bind(amount)
                        .bind(dst)
                        .execute(&mut **tx)
                        .await?;
                    sqlx::query(sql(format!(
                        "INSERT INTO {ledger} (task, seq, src, dst, amount) VALUES ($1, $2, $3, $4, $5)"
                    )))
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

    let sum: i64 = sqlx::query_scalar(sql(format!("SELECT sum(balance)::bigint FROM {accounts}")))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(sum, ACCOUNTS * START);
    let rows: i64 = sqlx::query_scalar(sql(format!("SELECT count(*) FROM {ledger}")))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, TASKS * TRANSFERS, "one ledger row per transfer");
    let mismatched: i64 = sqlx::query_scalar(sql(format!(
        "SELECT count(*) FROM {accounts} a WHERE a.balance != {START}
           - (SELECT coalesce(sum(amount), 0) FROM {ledger} WHERE src = a.id)
           + (SELECT coalesce(sum(amount), 0) FROM {ledger} WHERE dst = a.id)"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(mismatched, 0, "every balance is what its ledger rows say");
    let seen = seen.all();
    for (_, c) in &seen {
        assert!(
            [
                Verdict::Transient(TransientKind::SerializationFailure),
                Verdict::Transient(TransientKind::Deadlock)
            ]
            .contains(&c.verdict),
            "{c:?}"
        );
    }
    eprintln!(
        "postgres SERIALIZABLE: {} transfers, {} closure runs, {} retries ({} deadlocks; longest run of failures: {}), {checks} invariant checks",
        TASKS * TRANSFERS,
        runs.load(Ordering::Relaxed),
        seen.len(),
        seen.iter()
            .filter(|(_, c)| c.verdict == Verdict::Transient(TransientKind::Deadlock))
            .count(),
        seen.iter().map(|(attempt, _)| *attempt).max().unwrap_or(0),
    );
    drop_table(&pool, &accounts).await;
    drop_table(&pool, &ledger).await;
}
