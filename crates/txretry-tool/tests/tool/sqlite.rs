//! The basic scripts on real SQLite errors (SQLITE_BUSY from a second writer holding the
//! write lock): transient once, permanent, persistent, disabled, async vs blocking.

use std::sync::Arc;

use serde_json::json;
use txretry_core::{RetryPolicy, SqliteBegin, StopReason, TransientKind, TxOptions, Verdict};
use txretry_tool::{BoxError, FailureKind, Tool, ToolContext, Toolbox};

use crate::common::{BUSY, Counter, Db, Events, Holder, NoArgs, anyone, failure, fast, open};

const SCHEMA: &str = "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL);
                      INSERT INTO t VALUES (1, 0);";

/// An async tool whose handler writes outside any runner (one autocommit statement): its
/// SQLITE_BUSY is the handler's error, retried by the invocation loop. The holder is
/// released after `release_after` failed runs (never, with `u32::MAX`).
fn raw_writer(
    pool: &sqlx::SqlitePool,
    runs: &Counter,
    holder: &Arc<Holder>,
    release_after: u32,
) -> Tool {
    let (pool, runs, holder) = (pool.clone(), runs.clone(), holder.clone());
    Tool::new("bump", "Adds one.", move |_ctx: ToolContext, _: NoArgs| {
        let (pool, runs, holder) = (pool.clone(), runs.clone(), holder.clone());
        async move {
            let run = runs.bump();
            let result = sqlx::query("UPDATE t SET v = v + 1 WHERE id = 1")
                .execute(&pool)
                .await;
            if run == release_after {
                holder.release();
            }
            result?;
            Ok::<_, BoxError>(run)
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_once_then_success_runs_the_handler_twice_and_writes_once() {
    let db = Db::new(SCHEMA);
    let pool = db.pool().await;
    let holder = db.hold();
    let runs = Counter::default();
    let events = Events::default();
    let toolbox = events
        .install(Toolbox::builder().policy(fast(3)))
        .tool(raw_writer(&pool, &runs, &holder, 1))
        .build()
        .unwrap();

    let out = toolbox
        .invoke(&anyone(), "bump", json!({}), "call-1")
        .await
        .unwrap();

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
    let db = Db::new(SCHEMA);
    let pool = db.pool().await;
    let (runs, tx_attempts) = (Counter::default(), Counter::default());
    let events = Events::default();
    let tool = {
        let (pool, runs, tx_attempts) = (pool.clone(), runs.clone(), tx_attempts.clone());
        Tool::new(
            "insert",
            "Inserts id 1 again.",
            move |ctx: ToolContext, _: NoArgs| {
                let (pool, runs, tx_attempts) = (pool.clone(), runs.clone(), tx_attempts.clone());
                async move {
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
                }
            },
        )
    };
    let toolbox = events
        .install(Toolbox::builder().policy(fast(5)))
        .tool(tool)
        .build()
        .unwrap();

    let f = failure(toolbox.invoke(&anyone(), "insert", json!({}), "c").await);

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
    let db = Db::new(SCHEMA);
    let pool = db.pool().await;
    let holder = db.hold();
    let runs = Counter::default();
    let events = Events::default();
    let toolbox = events
        .install(Toolbox::builder().policy(fast(3)))
        .tool(raw_writer(&pool, &runs, &holder, u32::MAX))
        .build()
        .unwrap();

    let f = failure(toolbox.invoke(&anyone(), "bump", json!({}), "c").await);

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
    let db = Db::new(SCHEMA);
    let pool = db.pool().await;
    let holder = db.hold();
    let runs = Counter::default();
    let events = Events::default();
    let toolbox = events
        .install(Toolbox::builder().policy(fast(5)))
        .tool(raw_writer(&pool, &runs, &holder, u32::MAX).retry(RetryPolicy::disabled()))
        .build()
        .unwrap();

    let f = failure(toolbox.invoke(&anyone(), "bump", json!({}), "c").await);

    assert_eq!(runs.get(), 1);
    assert_eq!(f.attempts().len(), 1);
    assert_eq!(f.attempts()[0].code(), BUSY);
    assert!(events.retries().is_empty());
}

/// The same script for an async tool (sqlx) and a blocking one (rusqlite): run 1 fails
/// outside any runner (the invocation retries the handler); run 2's runner fails once and
/// retries its transaction in place, then commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_and_blocking_tools_give_identical_counts_and_events() {
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);

    // Async.
    let db = Db::new(SCHEMA);
    let pool = db.pool().await;
    let holder = db.hold();
    let (runs, tx_attempts) = (Counter::default(), Counter::default());
    let async_tool = {
        let (pool, runs, tx_attempts, holder, deferred) = (
            pool.clone(),
            runs.clone(),
            tx_attempts.clone(),
            holder.clone(),
            deferred.clone(),
        );
        Tool::new("bump", "", move |ctx: ToolContext, _: NoArgs| {
            let (pool, runs, tx_attempts, holder, deferred) = (
                pool.clone(),
                runs.clone(),
                tx_attempts.clone(),
                holder.clone(),
                deferred.clone(),
            );
            async move {
                if runs.bump() == 1 {
                    sqlx::query("UPDATE t SET v = v + 100")
                        .execute(&pool)
                        .await?;
                }
                txretry_sqlx::transaction_with(&pool, ctx.policy(), &deferred, async move |tx| {
                    let attempt = tx_attempts.bump();
                    let r = sqlx::query("UPDATE t SET v = v + 1")
                        .execute(&mut **tx)
                        .await;
                    if attempt == 1 {
                        holder.release();
                    }
                    r.map(drop)
                })
                .await?;
                Ok::<_, BoxError>("done")
            }
        })
    };
    let async_events = Events::default();
    let toolbox = async_events
        .install(Toolbox::builder().policy(fast(4)))
        .tool(async_tool)
        .build()
        .unwrap();
    let async_out = toolbox
        .invoke(&anyone(), "bump", json!({}), "c")
        .await
        .unwrap();
    let async_counts = (runs.get(), tx_attempts.get(), db.scalar("SELECT v FROM t"));

    // Blocking.
    let db = Db::new(SCHEMA);
    let holder = db.hold();
    let (runs, tx_attempts) = (Counter::default(), Counter::default());
    let blocking_tool = {
        let (path, runs, tx_attempts, holder) = (
            db.path().to_owned(),
            runs.clone(),
            tx_attempts.clone(),
            holder.clone(),
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
    };
    let blocking_events = Events::default();
    let toolbox = blocking_events
        .install(Toolbox::builder().policy(fast(4)))
        .tool(blocking_tool)
        .build()
        .unwrap();
    let blocking_out = toolbox
        .invoke(&anyone(), "bump", json!({}), "c")
        .await
        .unwrap();
    let blocking_counts = (runs.get(), tx_attempts.get(), db.scalar("SELECT v FROM t"));

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
    let db = Db::new(SCHEMA);
    let pool = db.pool().await;
    let holder = db.hold();
    let runs = Counter::default();
    let tool = {
        let (pool, runs, holder) = (pool.clone(), runs.clone(), holder.clone());
        Tool::new("bump", "", move |_ctx: ToolContext, _: NoArgs| {
            let (pool, runs, holder) = (pool.clone(), runs.clone(), holder.clone());
            async move {
                let run = runs.bump();
                let r = sqlx::query("UPDATE t SET v = v + 1").execute(&pool).await;
                if run == 1 {
                    holder.release();
                }
                r.map_err(anyhow::Error::from)?;
                Ok::<_, anyhow::Error>(run)
            }
        })
    };
    let toolbox = Toolbox::builder()
        .policy(fast(3))
        .tool(tool)
        .build()
        .unwrap();

    let out = toolbox
        .invoke(&anyone(), "bump", json!({}), "c")
        .await
        .unwrap();

    assert_eq!(out, json!(2));
    assert_eq!(db.scalar("SELECT v FROM t"), 1);
}
