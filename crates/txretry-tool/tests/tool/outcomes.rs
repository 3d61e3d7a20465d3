//! Point 5: outcomes are typed, never inferred from text or payload. A business error and
//! any `Ok` output surface once, untouched; exhausted retries carry every attempt's error
//! and kind; a panicking handler is never retried; dropping an invocation cancels it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use txretry_core::{Phase, TransientKind, TxError, Verdict};
use txretry_tool::{BoxError, FailureKind, InvokeError, Panicked, Tool, ToolContext, Toolbox};

use crate::common::{
    BUSY, Counter, Db, Locked, NoArgs, anyone, call, failure, fast, shared_tool, toolbox, within,
};

const ORDERS: &str = "CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL);
                      INSERT INTO orders VALUES (1, 'open');";

#[derive(Debug, thiserror::Error)]
enum OrderError {
    #[error("order {0} not found")]
    NotFound(i64),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Cancel {
    order_id: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p5_business_error_surfaces_once_with_its_own_type() {
    let db = Db::new(ORDERS);
    let pool = db.pool().await;
    let (runs, tx_attempts) = (Counter::default(), Counter::default());
    let tool = {
        let (pool, runs, tx_attempts) = (pool.clone(), runs.clone(), tx_attempts.clone());
        Tool::new("cancel_order", "", move |ctx: ToolContext, args: Cancel| {
            let (pool, runs, tx_attempts) = (pool.clone(), runs.clone(), tx_attempts.clone());
            async move {
                runs.bump();
                txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                    tx_attempts.bump();
                    let done = sqlx::query("UPDATE orders SET status = 'cancelled' WHERE id = ?")
                        .bind(args.order_id)
                        .execute(&mut **tx)
                        .await?;
                    if done.rows_affected() == 0 {
                        return Err(OrderError::NotFound(args.order_id));
                    }
                    Ok(())
                })
                .await?;
                Ok::<_, BoxError>("cancelled")
            }
        })
    };
    let toolbox = toolbox(5, tool);

    let f = failure(
        toolbox
            .invoke(&anyone(), "cancel_order", json!({"order_id": 99}), "c")
            .await,
    );

    assert_eq!((runs.get(), tx_attempts.get()), (1, 1));
    assert_eq!(f.kind(), FailureKind::Business);
    assert_eq!(f.to_string(), "cancel_order: order 99 not found");
    let original = f
        .last_error()
        .downcast_ref::<TxError<OrderError>>()
        .expect("the runner's error, boxed as it was");
    assert!(matches!(original.error(), OrderError::NotFound(99)));
    assert_eq!(original.outcome().verdict(), Verdict::Permanent);
    assert_eq!(
        db.scalar("SELECT count(*) FROM orders WHERE status = 'open'"),
        1
    );
}

#[tokio::test]
async fn p5_ok_output_is_returned_untouched_and_never_inspected() {
    let runs = Counter::default();
    let payload = json!({"retryable": true, "error": "deadlock detected", "code": "40P01"});
    let shared = (runs.clone(), payload.clone());
    let tool = shared_tool("report", "", shared, |_, (runs, payload)| async move {
        runs.bump();
        Ok::<_, BoxError>(payload)
    });

    let out = call(&toolbox(5, tool), "report", "c").await.unwrap();

    assert_eq!(out, payload);
    assert_eq!(runs.get(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p5_exhausted_retries_carry_every_attempts_error_and_kind() {
    let Locked { pool, holder, .. } = Locked::new(ORDERS).await; // never released
    let tool = shared_tool("close_all", "", pool, |_, pool| async move {
        sqlx::query("UPDATE orders SET status = 'closed'")
            .execute(&pool)
            .await?;
        Ok::<_, BoxError>(())
    });

    let f = failure(call(&toolbox(3, tool), "close_all", "c").await);

    assert_eq!(f.kind(), FailureKind::RetriesExhausted);
    assert_eq!(f.attempts().len(), 3);
    for attempt in f.attempts() {
        assert_eq!(attempt.kind(), Some(TransientKind::Busy));
        assert_eq!(attempt.code(), BUSY);
        assert_eq!(attempt.phase(), Phase::Body);
        let original = attempt
            .error()
            .downcast_ref::<sqlx::Error>()
            .expect("the driver's own error");
        assert!(original.as_database_error().is_some(), "{original}");
    }
    assert_eq!(f.outcome().attempts(), 3);
    assert!(
        !f.to_string().contains("database is locked"),
        "driver text is not shown to the model: {f}"
    );
    holder.release();
}

#[tokio::test]
async fn p5_a_panicking_handler_runs_once_async_and_blocking() {
    let (async_runs, blocking_runs) = (Counter::default(), Counter::default());
    let async_tool = shared_tool("async_boom", "", async_runs.clone(), |_, runs| async move {
        runs.bump();
        if runs.get() > 0 {
            panic!("boom");
        }
        Ok::<_, BoxError>(())
    });
    let blocking_tool = {
        let runs = blocking_runs.clone();
        Tool::blocking("blocking_boom", "", move |_ctx: ToolContext, _: NoArgs| {
            runs.bump();
            if runs.get() > 0 {
                panic!("boom");
            }
            Ok::<_, BoxError>(())
        })
    };
    let toolbox = Toolbox::builder()
        .policy(fast(5))
        .tool(async_tool)
        .tool(blocking_tool)
        .build()
        .unwrap();

    for name in ["async_boom", "blocking_boom"] {
        let f = failure(call(&toolbox, name, "c").await);
        assert_eq!(f.kind(), FailureKind::Panicked, "{name}");
        assert!(f.attempts()[0].panicked());
        assert_eq!(
            f.last_error()
                .downcast_ref::<Panicked>()
                .map(Panicked::message),
            Some("boom")
        );
        assert_eq!(f.to_string(), format!("{name}: internal error in the tool"));
    }
    assert_eq!((async_runs.get(), blocking_runs.get()), (1, 1));
}

/// Dropping the invocation drops the running attempt: its transaction is rolled back and
/// the write lock it held is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p5_dropping_the_invocation_cancels_the_attempt() {
    let db = Db::new(ORDERS);
    let pool = db.pool().await;
    let inside = Arc::new(tokio::sync::Notify::new());
    let dropped = Arc::new(AtomicBool::new(false));
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let shared = (pool.clone(), inside.clone(), dropped.clone());
    let tool = shared_tool(
        "stall",
        "",
        shared,
        |ctx, (pool, inside, dropped)| async move {
            let _flag = Flag(dropped);
            txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                sqlx::query("INSERT INTO orders VALUES (2, 'open')")
                    .execute(&mut **tx)
                    .await?;
                inside.notify_one();
                std::future::pending::<()>().await;
                Ok::<_, sqlx::Error>(())
            })
            .await?;
            Ok::<_, BoxError>(())
        },
    );
    let toolbox = Toolbox::builder().tool(tool).build().unwrap();

    let caller = anyone();
    within(async {
        tokio::select! {
            result = toolbox.invoke(&caller, "stall", json!({}), "c") => panic!("finished: {result:?}"),
            () = inside.notified() => {}
        }
    })
    .await;

    assert!(
        dropped.load(Ordering::SeqCst),
        "the attempt's future was dropped"
    );
    // Another writer gets the lock (waiting for the rollback if it is still in progress),
    // and the stalled insert is not there.
    let conn = db.conn();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").unwrap();
    assert_eq!(db.scalar("SELECT count(*) FROM orders"), 1);
}

#[tokio::test]
async fn p5_output_that_cannot_be_serialized_is_reported_not_retried() {
    let runs = Counter::default();
    let tool = shared_tool("odd", "", runs.clone(), |_, runs| async move {
        runs.bump();
        // JSON object keys must be strings.
        let map: std::collections::HashMap<(i32, i32), i32> = [((1, 2), 3)].into();
        Ok::<_, BoxError>(map)
    });

    let err = call(&toolbox(5, tool), "odd", "c").await.unwrap_err();

    assert!(matches!(err, InvokeError::InvalidOutput { .. }), "{err:?}");
    assert_eq!(runs.get(), 1);
}

/// A call that waited out the pool's acquire timeout says the pool was full, not only
/// that the connection failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_is_named_in_the_failure() {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    let db = Db::new(ORDERS);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_millis(200))
        .connect_with(SqliteConnectOptions::new().filename(db.path()))
        .await
        .unwrap();
    // The pool's only connection, in use for the whole call.
    let held = pool.acquire().await.unwrap();
    let tool = {
        let pool = pool.clone();
        Tool::new("list_orders", "", move |ctx: ToolContext, _: NoArgs| {
            let pool = pool.clone();
            async move {
                txretry_sqlx::transaction(&pool, ctx.policy(), async |tx| {
                    sqlx::query("SELECT 1").execute(&mut **tx).await.map(drop)
                })
                .await?;
                Ok::<_, BoxError>("listed")
            }
        })
    };
    let f = failure(
        toolbox(5, tool)
            .invoke(&anyone(), "list_orders", json!({}), "c")
            .await,
    );
    assert_eq!(f.kind(), FailureKind::NotRetried);
    assert_eq!(
        f.to_string(),
        "list_orders: temporary database failure (connection: no connection from the pool in time: the database is down or unreachable, or every connection is busy); nothing was committed, try again later"
    );
    drop(held);
}

/// A blocking attempt cannot be stopped at its timeout: one that commits after it is
/// reported as committed, not as "may or may not have taken effect".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_attempt_that_commits_after_its_timeout_says_it_committed() {
    let db = Db::new(ORDERS);
    let path = db.path().to_owned();
    let runs = Counter::default();
    let handler_runs = runs.clone();
    let tool = Tool::blocking("cancel_order", "", move |ctx: ToolContext, _: NoArgs| {
        handler_runs.bump();
        let mut conn = rusqlite::Connection::open(&path)?;
        txretry_rusqlite::transaction(&mut conn, ctx.policy(), |tx| {
            tx.execute("UPDATE orders SET status = 'cancelled' WHERE id = 1", [])?;
            // Past the timeout: the thread runs on, and commits.
            std::thread::sleep(Duration::from_millis(500));
            Ok::<_, rusqlite::Error>(())
        })?;
        Ok::<_, BoxError>("cancelled")
    })
    .idempotent(true)
    .timeout(Duration::from_millis(100));
    let f = failure(
        toolbox(5, tool)
            .invoke(&anyone(), "cancel_order", json!({}), "c")
            .await,
    );
    assert_eq!(f.kind(), FailureKind::TimedOut);
    assert!(f.committed());
    // Idempotent, yet not run again: its work committed.
    assert_eq!(runs.get(), 1);
    assert_eq!(
        f.to_string(),
        "cancel_order: timed out after 1 attempt, after part of its work was committed; it was not run again, check its effects before trying again"
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM orders WHERE status = 'cancelled'"),
        1
    );
}
