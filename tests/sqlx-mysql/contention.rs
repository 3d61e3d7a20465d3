//! 16 tasks × 50 transfers between 4 hot accounts at the server's default isolation
//! (REPEATABLE READ). Transfers lock their rows with `SELECT … FOR UPDATE` (InnoDB's plain
//! reads are snapshots: read-then-write without a locking read loses updates), in either
//! order, so they deadlock (1213) and the runner retries. Every transfer commits exactly
//! once, the sum of balances never changes, the ledger has one row per transfer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use txretry::{Code, TransientKind, TxOptions, Verdict};

use crate::common::{Seen, drop_table, exec, policy, setup, sql, table, within};

const TASKS: i64 = 16;
const TRANSFERS: i64 = 50;
const ACCOUNTS: i64 = 4;
const START: i64 = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_default_isolation() {
    let Some((_, pool)) = setup("sqlx-mysql contention", 8).await else {
        return;
    };
    let (accounts, ledger) = (table("accounts"), table("ledger"));
    exec(
        &pool,
        format!(
            "CREATE TABLE {accounts} (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB"
        ),
    )
    .await;
    exec(
        &pool,
        format!(
            "INSERT INTO {accounts} VALUES (0, {START}), (1, {START}), (2, {START}), (3, {START})"
        ),
    )
    .await;
    exec(
        &pool,
        format!(
            "CREATE TABLE {ledger} (id BIGINT AUTO_INCREMENT PRIMARY KEY, task BIGINT NOT NULL, seq BIGINT NOT NULL,
                                    src BIGINT NOT NULL, dst BIGINT NOT NULL, amount BIGINT NOT NULL,
                                    UNIQUE (task, seq)) ENGINE=InnoDB"
        ),
    )
    .await;

    let seen = Seen::default();
    let policy = policy(100, &seen);
    let runs = Arc::new(AtomicU32::new(0));

    // A reader checks the invariant while the writers run (a consistent snapshot).
    let done = Arc::new(AtomicBool::new(false));
    let reader = tokio::spawn({
        let (pool, policy, done, accounts) =
            (pool.clone(), policy.clone(), done.clone(), accounts.clone());
        async move {
            let read_only = TxOptions::new().read_only(true);
            let mut checks = 0;
            while !done.load(Ordering::SeqCst) {
                // Closures in a spawned task own their captures (see the runner's docs).
                let select = format!("SELECT CAST(sum(balance) AS SIGNED) FROM {accounts}");
                let sum: i64 =
                    txretry::sqlx::transaction_with(&pool, &policy, &read_only, async move |tx| {
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
        let (pool, policy, runs) = (pool.clone(), policy.clone(), runs.clone());
        let (accounts, ledger) = (accounts.clone(), ledger.clone());
        tasks.spawn(async move {
            for seq in 0..TRANSFERS {
                let src = (task + seq) % ACCOUNTS;
                let dst = (src + 1 + seq % 3) % ACCOUNTS;
                let amount = 1 + (task * 7 + seq) % 13;
                let (accounts, ledger, runs) = (accounts.clone(), ledger.clone(), runs.clone());
                txretry::sqlx::transaction(&pool, &policy, async move |tx| {
                    runs.fetch_add(1, Ordering::Relaxed);
                    let lock = format!("SELECT balance FROM {accounts} WHERE id = ? FOR UPDATE");
                    let set = format!("UPDATE {accounts} SET balance = ? WHERE id = ?");
                    let from: i64 = sqlx::query_scalar(sql(lock.clone()))
                        .bind(src)
                        .fetch_one(&mut **tx)
                        .await?;
                    let to: i64 = sqlx::query_scalar(sql(lock))
                        .bind(dst)
                        .fetch_one(&mut **tx)
                        .await?;
                    sqlx::query(sql(set.clone()))
                        .bind(from - amount)
                        .bind(src)
                        .execute(&mut **tx)
                        .await?;
                    sqlx::query(sql(set))
                        .bind(to + amount)
                        .bind(dst)
                        .execute(&mut **tx)
                        .await?;
                    sqlx::query(sql(format!(
                        "INSERT INTO {ledger} (task, seq, src, dst, amount) VALUES (?, ?, ?, ?, ?)"
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

    let sum: i64 = sqlx::query_scalar(sql(format!(
        "SELECT CAST(sum(balance) AS SIGNED) FROM {accounts}"
    )))
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
        assert_eq!(
            c.verdict,
            Verdict::Transient(TransientKind::Deadlock),
            "{c:?}"
        );
        assert_eq!(c.code, Some(Code::MySql(1213)));
    }
    eprintln!(
        "mysql default isolation: {} transfers, {} closure runs, {} retries (longest run of failures: {}), {checks} invariant checks",
        TASKS * TRANSFERS,
        runs.load(Ordering::Relaxed),
        seen.len(),
        seen.iter().map(|(attempt, _)| *attempt).max().unwrap_or(0),
    );
    drop_table(&pool, &accounts).await;
    drop_table(&pool, &ledger).await;
}
