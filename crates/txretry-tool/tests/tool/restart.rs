//! Point 4: `restart_safe(false)` runs the handler at most once, async and blocking alike; a
//! per-attempt timeout is retried only for idempotent tools, and the timed-out attempt is
//! cancelled (its transaction rolled back) before the next one starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use serde_json::json;
use txretry_core::Verdict;
use txretry_tool::{BoxError, FailureKind, Tool, ToolContext, Toolbox};

use crate::common::{Counter, Db, NoArgs, anyone, failure, fast, open, within};

const SCHEMA: &str = "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL);
                      INSERT INTO t VALUES (1, 0);";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p4_restart_safe_false_runs_the_handler_once_async_and_blocking() {
    let db = Db::new(SCHEMA);
    let pool = db.pool().await;
    let holder = db.hold(); // never released: every write is busy
    let (async_runs, blocking_runs) = (Counter::default(), Counter::default());
    let async_tool = {
        let (pool, runs) = (pool.clone(), async_runs.clone());
        Tool::new("async_once", "", move |_ctx: ToolContext, _: NoArgs| {
            let (pool, runs) = (pool.clone(), runs.clone());
            async move {
                runs.bump();
                sqlx::query("UPDATE t SET v = v + 1").execute(&pool).await?;
                Ok::<_, BoxError>(())
            }
        })
        .restart_safe(false)
    };
    let blocking_tool = {
        let (path, runs) = (db.path().to_owned(), blocking_runs.clone());
        Tool::blocking("blocking_once", "", move |_ctx: ToolContext, _: NoArgs| {
            runs.bump();
            open(&path).execute("UPDATE t SET v = v + 1", [])?;
            Ok::<_, BoxError>(())
        })
        .restart_safe(false)
    };
    let toolbox = Toolbox::builder()
        .policy(fast(5))
        .tool(async_tool)
        .tool(blocking_tool)
        .build()
        .unwrap();
    assert!(!toolbox.offered(&anyone())[0].is_restart_safe());

    for name in ["async_once", "blocking_once"] {
        let f = failure(toolbox.invoke(&anyone(), name, json!({}), "c").await);
        assert_eq!(f.kind(), FailureKind::NotRestartable, "{name}");
        assert!(!f.committed());
        assert_eq!(f.attempts().len(), 1);
        assert_eq!(
            f.to_string(),
            format!(
                "{name}: failed (busy); this tool is not run again automatically, nothing was committed"
            )
        );
    }
    assert_eq!((async_runs.get(), blocking_runs.get()), (1, 1));
    holder.release();
}

/// Counts attempts in flight; the guard leaves when the attempt's future is dropped.
#[derive(Clone, Default)]
struct InFlight {
    now: Arc<AtomicU32>,
    overlapped: Arc<AtomicBool>,
}

struct Leave(Arc<AtomicU32>);

impl Drop for Leave {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl InFlight {
    fn enter(&self) -> Leave {
        if self.now.fetch_add(1, Ordering::SeqCst) != 0 {
            self.overlapped.store(true, Ordering::SeqCst);
        }
        Leave(self.now.clone())
    }
}

/// Paused time: only the timing logic is under test. The first attempt never finishes.
#[tokio::test(start_paused = true)]
async fn p4_timeout_is_retried_only_for_idempotent_tools_and_never_overlaps() {
    for idempotent in [false, true] {
        let runs = Counter::default();
        let in_flight = InFlight::default();
        let tool = {
            let (runs, in_flight) = (runs.clone(), in_flight.clone());
            Tool::new("slow", "", move |_ctx: ToolContext, _: NoArgs| {
                let (runs, in_flight) = (runs.clone(), in_flight.clone());
                async move {
                    let _inside = in_flight.enter();
                    let run = runs.bump();
                    if run == 1 {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    }
                    Ok::<_, BoxError>(run)
                }
            })
            .timeout(Duration::from_secs(1))
            .idempotent(idempotent)
        };
        let toolbox = Toolbox::builder()
            .policy(fast(3))
            .tool(tool)
            .build()
            .unwrap();

        let result = toolbox.invoke(&anyone(), "slow", json!({}), "c").await;

        assert!(
            !in_flight.overlapped.load(Ordering::SeqCst),
            "two attempts in flight"
        );
        assert_eq!(
            in_flight.now.load(Ordering::SeqCst),
            0,
            "the timed-out attempt was dropped"
        );
        if idempotent {
            assert_eq!(result.unwrap(), json!(2));
            assert_eq!(runs.get(), 2);
        } else {
            let f = failure(result);
            assert_eq!(f.kind(), FailureKind::TimedOut);
            assert_eq!(runs.get(), 1, "not idempotent: a timeout is not retried");
            assert!(f.attempts()[0].timed_out());
            assert_eq!(f.attempts()[0].verdict(), Verdict::Ambiguous);
            assert_eq!(
                f.to_string(),
                "slow: timed out after 1 attempt; it may or may not have taken effect, check before trying again"
            );
        }
    }
}

/// A real transaction: the timed-out attempt inserted a row and stalled; its future is
/// dropped, its transaction rolled back, and only the retry's row is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p4_timed_out_sqlite_attempt_is_rolled_back_before_the_retry() {
    let db = Db::new(
        "CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, attempt INTEGER NOT NULL);",
    );
    let pool = db.pool().await;
    let runs = Counter::default();
    let in_flight = InFlight::default();
    let tool = {
        let (pool, runs, in_flight) = (pool.clone(), runs.clone(), in_flight.clone());
        Tool::new("add", "", move |ctx: ToolContext, _: NoArgs| {
            let (pool, runs, in_flight) = (pool.clone(), runs.clone(), in_flight.clone());
            async move {
                let _inside = in_flight.enter();
                let run = runs.bump();
                txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                    sqlx::query("INSERT INTO items (attempt) VALUES (?)")
                        .bind(i64::from(run))
                        .execute(&mut **tx)
                        .await?;
                    if run == 1 {
                        // Stalls inside the open transaction, holding the write lock.
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, sqlx::Error>(())
                })
                .await?;
                Ok::<_, BoxError>(run)
            }
        })
        .timeout(Duration::from_millis(300))
        .idempotent(true)
    };
    let toolbox = Toolbox::builder()
        .policy(fast(3))
        .tool(tool)
        .build()
        .unwrap();

    let out = within(toolbox.invoke(&anyone(), "add", json!({}), "c"))
        .await
        .unwrap();

    assert_eq!(out, json!(2));
    assert!(!in_flight.overlapped.load(Ordering::SeqCst));
    let rows: Vec<i64> = {
        let conn = db.conn();
        let mut stmt = conn.prepare("SELECT attempt FROM items").unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(rows, [2], "the timed-out attempt's insert was rolled back");
}

/// A blocking attempt cannot be stopped from outside: on timeout it is marked cancelled and
/// the invocation waits for its thread before the retry starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p4_blocking_timeout_waits_for_the_thread_before_retrying() {
    let runs = Counter::default();
    let in_flight = InFlight::default();
    let saw_cancel = Arc::new(AtomicBool::new(false));
    let tool = {
        let (runs, in_flight, saw_cancel) = (runs.clone(), in_flight.clone(), saw_cancel.clone());
        Tool::blocking("slow", "", move |ctx: ToolContext, _: NoArgs| {
            let _inside = in_flight.enter();
            let run = runs.bump();
            if run == 1 {
                while !ctx.is_cancelled() {
                    std::thread::sleep(Duration::from_millis(5));
                }
                saw_cancel.store(true, Ordering::SeqCst);
                // Give a wrongly started second attempt time to overlap.
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok::<_, BoxError>(run)
        })
        .timeout(Duration::from_millis(100))
        .idempotent(true)
    };
    let toolbox = Toolbox::builder()
        .policy(fast(3))
        .tool(tool)
        .build()
        .unwrap();

    let out = within(toolbox.invoke(&anyone(), "slow", json!({}), "c"))
        .await
        .unwrap();

    assert_eq!(out, json!(2), "the first attempt's late Ok does not count");
    assert_eq!(runs.get(), 2);
    assert!(saw_cancel.load(Ordering::SeqCst));
    assert!(
        !in_flight.overlapped.load(Ordering::SeqCst),
        "two attempts in flight"
    );
}

/// `max_elapsed` counts from the start of the first attempt (paused time; the error is the
/// driver phrase the classifier knows, no transaction is involved): attempts take 0.6 s,
/// waits 1 s, limit 3 s. After attempt 1 (0.6 s): 1.6 s ≤ 3 s, retry; after attempt 2
/// (2.2 s): 3.2 s > 3 s, stop.
#[tokio::test(start_paused = true)]
async fn max_elapsed_counts_from_the_first_attempt() {
    let runs = Counter::default();
    let tool = {
        let runs = runs.clone();
        Tool::new("slow_busy", "", move |_ctx: ToolContext, _: NoArgs| {
            let runs = runs.clone();
            async move {
                runs.bump();
                tokio::time::sleep(Duration::from_millis(600)).await;
                Err::<(), BoxError>(Box::new(std::io::Error::other("database is locked")))
            }
        })
    };
    let policy = txretry_core::RetryPolicy::builder()
        .max_attempts(10)
        .backoff(txretry_core::Backoff::Constant(Duration::from_secs(1)))
        .max_elapsed(Duration::from_secs(3))
        .build()
        .unwrap();
    let toolbox = Toolbox::builder()
        .policy(policy)
        .tool(tool)
        .build()
        .unwrap();

    let f = failure(toolbox.invoke(&anyone(), "slow_busy", json!({}), "c").await);

    assert_eq!(runs.get(), 2);
    assert_eq!(f.kind(), FailureKind::RetriesExhausted);
    assert_eq!(
        f.outcome().stop_reason(),
        txretry_core::StopReason::ElapsedExceeded
    );
}
