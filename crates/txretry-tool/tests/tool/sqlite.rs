//! The basic scripts on real SQLite errors (SQLITE_BUSY from a second writer holding the
//! write lock): transient once, permanent, persistent, disabled, async vs blocking.

use std::sync::Arc;

use serde_json::{Value, json};
use txretry_core::{RetryPolicy, SqliteBegin, StopReason, TransientKind, TxOptions, Verdict};
use txretry_tool::{BoxError, FailureKind, Tool, ToolContext};

use crate::common::{
    BUSY, Counter, Db, Events, Holder, Locked, NoArgs, ONE_ROW, call, failure, open, runner_bump,
    shared_tool, toolbox,
};

/// An async tool whose handler writes outside any runner (one autocommit statement): its
/// SQLITE_BUSY is the handler's error, retried by the invocation loop. The holder is
/// released after `release_after` failed runs (never, with `u32::MAX`).
fn raw_writer(
    pool: &sqlx::SqlitePool,
    runs: &Counter,
    holder: &Arc<Holder>,
    release_after: u32,
) -> Tool {
    let shared = (pool.clone(), runs.clone(), holder.clone());
    shared_tool(
        "bump",
        "Adds one.",
        shared,
        move |_, (pool, runs, holder)| async move {
            let run = runs.bump();
            let result = sqlx::query("UPDATE t SET v = v + 1 WHERE id = 1")
                .execute(&pool)
                .await;
            if run == release_after {
                holder.release();
            }
            result?;
            Ok::<_, BoxError>(run)
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_once_then_success_runs_the_handler_twice_and_writes_once() {
    let Locked { db, pool, holder } = Locked::new(ONE_ROW).await;
    let runs = Counter::default();
    let events = Events::default();
    let toolbox = events.toolbox(3, raw_writer(&pool, &runs, &holder, 1));

    let out = call(&toolbox, "bump", "call-1").await.unwrap();

    assert_eq!(out, json!(2), "the second run's output");
    assert_eq!(runs.get(), 2);
    assert_eq!(
        db.scalar("SELECT v FROM t WHERE id = 1"),
        1,
        "the side effect is in the database once"
    );
    let retries = events.retries();
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(retries[0].attempt, 1);
    assert_eq!(retries[0].verdict, Verdict::Transient(TransientKind::Busy));
    assert_eq!(retries[0].code, BUSY);
    assert_eq!(retries[0].tool.as_deref(), Some("bump"));
    assert_eq!(retries[0].call_id.as_deref(), Some("call-1"));
    assert_eq!(retries[0].level.as_deref(), Some("toolbox"));
    assert!(events.give_ups().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_error_runs_once() {
    let db = Db::new(ONE_ROW);
    let pool = db.pool().await;
    let (runs, tx_attempts) = (Counter::default(), Counter::default());
    let events = Events::default();
    let tool = shared_tool(
        "insert",
        "Inserts id 1 again.",
        (pool.clone(), runs.clone(), tx_attempts.clone()),
        |ctx, (pool, runs, tx_attempts)| async move {
            runs.bump();
            txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                tx_attempts.bump();
                // A real constraint violation: the primary key exists.
                sqlx::query("INSERT INTO t VALUES (1, 5)")
                    .execute(&mut **tx)
                    .await
            })
            .await?;
            Ok::<_, BoxError>(())
        },
    );
    let toolbox = events.toolbox(5, tool);

    let f = failure(call(&toolbox, "insert", "c").await);

    assert_eq!(f.kind(), FailureKind::Business);
    assert_eq!((runs.get(), tx_attempts.get()), (1, 1));
    assert_eq!(f.attempts().len(), 1);
    assert_eq!(f.attempts()[0].verdict(), Verdict::Permanent);
    assert!(f.to_string().contains("UNIQUE constraint failed"), "{f}");
    assert!(events.retries().is_empty());
    assert!(
        events.give_ups().is_empty(),
        "a permanent failure is an ordinary outcome"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_transient_with_3_attempts_makes_exactly_3_transaction_attempts() {
    let Locked { db, pool, holder } = Locked::new(ONE_ROW).await;
    let runs = Counter::default();
    let events = Events::default();
    let toolbox = events.toolbox(3, raw_writer(&pool, &runs, &holder, u32::MAX));

    let f = failure(call(&toolbox, "bump", "c").await);

    assert_eq!(runs.get(), 3, "three attempts in all");
    assert_eq!(f.kind(), FailureKind::RetriesExhausted);
    assert_eq!(f.retries(), 2);
    assert_eq!(f.outcome().stop_reason(), StopReason::AttemptsExhausted);
    let attempts: Vec<_> = events.retries().iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [1, 2]);
    let give_ups = events.give_ups();
    assert_eq!(give_ups.len(), 1, "one final event");
    assert_eq!(give_ups[0].attempts, 3);
    assert_eq!(give_ups[0].reason, StopReason::AttemptsExhausted);
    assert_eq!(
        f.to_string(),
        "bump: still failing after 3 attempts (busy); nothing was committed, try again later"
    );
    holder.release();
    assert_eq!(db.scalar("SELECT v FROM t WHERE id = 1"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_policy_runs_once() {
    let Locked { pool, holder, .. } = Locked::new(ONE_ROW).await;
    let runs = Counter::default();
    let events = Events::default();
    let tool = raw_writer(&pool, &runs, &holder, u32::MAX).retry(RetryPolicy::disabled());
    let toolbox = events.toolbox(5, tool);

    let f = failure(call(&toolbox, "bump", "c").await);

    assert_eq!(runs.get(), 1);
    assert_eq!(f.attempts().len(), 1);
    assert_eq!(f.attempts()[0].code(), BUSY);
    assert!(events.retries().is_empty());
}

/// One run of the script below: the tool `make` makes (given a database of its own whose
/// write lock is held, and counters of handler runs and transaction attempts), called
/// once under a budget of 4. Its output, (runs, attempts, the value after), and its events.
async fn script(
    make: impl FnOnce(&Locked, &Counter, &Counter) -> Tool,
) -> (Value, (u32, u32, i64), Events) {
    let locked = Locked::new(ONE_ROW).await;
    let (runs, tx_attempts) = (Counter::default(), Counter::default());
    let events = Events::default();
    let toolbox = events.toolbox(4, make(&locked, &runs, &tx_attempts));
    let out = call(&toolbox, "bump", "c").await.unwrap();
    let value = locked.db.scalar("SELECT v FROM t");
    (out, (runs.get(), tx_attempts.get(), value), events)
}

/// The same script for an async tool (sqlx) and a blocking one (rusqlite): run 1 fails
/// outside any runner (the invocation retries the handler); run 2's runner fails once and
/// retries its transaction in place, then commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_and_blocking_tools_give_identical_counts_and_events() {
    let (async_out, async_counts, async_events) = script(|locked, runs, tx_attempts| {
        let shared = (
            locked.pool.clone(),
            runs.clone(),
            tx_attempts.clone(),
            locked.holder.clone(),
        );
        shared_tool(
            "bump",
            "",
            shared,
            |ctx, (pool, runs, tx_attempts, holder)| async move {
                if runs.bump() == 1 {
                    sqlx::query("UPDATE t SET v = v + 100")
                        .execute(&pool)
                        .await?;
                }
                runner_bump(&pool, ctx.policy(), tx_attempts, Some(holder)).await?;
                Ok::<_, BoxError>("done")
            },
        )
    })
    .await;

    // The same DEFERRED transaction as `runner_bump`'s.
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    let (blocking_out, blocking_counts, blocking_events) = script(|locked, runs, tx_attempts| {
        let (path, runs, tx_attempts, holder) = (
            locked.db.path().to_owned(),
            runs.clone(),
            tx_attempts.clone(),
            locked.holder.clone(),
        );
        Tool::blocking("bump", "", move |ctx: ToolContext, _: NoArgs| {
            let mut conn = open(&path);
            if runs.bump() == 1 {
                conn.execute("UPDATE t SET v = v + 100", [])?;
            }
            txretry_rusqlite::transaction_with(&mut conn, ctx.policy(), &deferred, |tx| {
                let attempt = tx_attempts.bump();
                let r = tx.execute("UPDATE t SET v = v + 1", []);
                if attempt == 1 {
                    holder.release();
                }
                r.map(drop)
            })?;
            Ok::<_, BoxError>("done")
        })
    })
    .await;

    assert_eq!(async_out, blocking_out);
    assert_eq!(
        async_counts,
        (2, 2, 1),
        "handler runs, transaction attempts, value"
    );
    assert_eq!(blocking_counts, async_counts);
    let script = async_events.retry_script();
    let busy = Verdict::Transient(TransientKind::Busy);
    let level = Some("toolbox".to_owned());
    assert_eq!(
        script,
        [(1, busy, BUSY, level.clone()), (1, busy, BUSY, level)]
    );
    assert_eq!(blocking_events.retry_script(), script);
    assert!(async_events.give_ups().is_empty() && blocking_events.give_ups().is_empty());
}

/// A handler that returns `anyhow::Error` still has its driver error classified (through
/// the box, by its `source()` chain), not its text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anyhow_errors_are_classified_by_their_chain() {
    let Locked { db, pool, holder } = Locked::new(ONE_ROW).await;
    let runs = Counter::default();
    let shared = (pool.clone(), runs.clone(), holder.clone());
    let tool = shared_tool("bump", "", shared, |_, (pool, runs, holder)| async move {
        let run = runs.bump();
        let r = sqlx::query("UPDATE t SET v = v + 1").execute(&pool).await;
        if run == 1 {
            holder.release();
        }
        r.map_err(anyhow::Error::from)?;
        Ok::<_, anyhow::Error>(run)
    });
    let toolbox = toolbox(3, tool);

    let out = call(&toolbox, "bump", "c").await.unwrap();

    assert_eq!(out, json!(2));
    assert_eq!(db.scalar("SELECT v FROM t"), 1);
}
