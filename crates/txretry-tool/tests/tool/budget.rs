//! Point 2: one budget per invocation. Runners called with `ctx.policy()` draw from it, so a
//! transaction that fails transiently every time runs `max_attempts` times in total, never
//! `max_attempts²`, whatever mix of runner-level and handler-level retries happens.

use txretry_core::{StopReason, TransientKind, Verdict};
use txretry_tool::{BoxError, FailureKind, Tool};

use crate::common::{
    BUSY, Counter, Events, Locked, ONE_ROW, call, failure, runner_bump, shared_tool,
};

/// A tool whose handler runs one transaction through the sqlx runner under `ctx.policy()`
/// (DEFERRED, so each attempt enters the closure and fails at its UPDATE). When `raw_first`,
/// its first run writes outside the runner first (a handler-level failure).
fn runner_tool(
    pool: &sqlx::SqlitePool,
    runs: &Counter,
    tx_attempts: &Counter,
    raw_first: bool,
) -> Tool {
    let shared = (pool.clone(), runs.clone(), tx_attempts.clone());
    shared_tool(
        "pay",
        "",
        shared,
        move |ctx, (pool, runs, tx_attempts)| async move {
            let run = runs.bump();
            if raw_first && run == 1 {
                tx_attempts.bump();
                sqlx::query("UPDATE t SET v = v + 1").execute(&pool).await?;
            }
            runner_bump(&pool, ctx.policy(), tx_attempts, None).await?;
            Ok::<_, BoxError>(())
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2_a_transaction_busy_every_time_runs_exactly_max_attempts_times() {
    let Locked { db, pool, holder } = Locked::new(ONE_ROW).await; // never released
    let (runs, tx_attempts) = (Counter::default(), Counter::default());
    let events = Events::default();
    let toolbox = events.toolbox(3, runner_tool(&pool, &runs, &tx_attempts, false));

    let f = failure(call(&toolbox, "pay", "call-9").await);

    assert_eq!(tx_attempts.get(), 3, "3 transaction attempts in all, not 9");
    assert_eq!(
        runs.get(),
        1,
        "the runner spent the budget; the handler is not run again"
    );
    assert_eq!(f.kind(), FailureKind::RetriesExhausted);
    assert_eq!(f.retries(), 2);
    // The handler's one failed run, judged by the runner that gave up on it.
    let attempt = &f.attempts()[0];
    assert_eq!(attempt.verdict(), Verdict::Transient(TransientKind::Busy));
    assert_eq!(attempt.code(), BUSY);
    let runner = attempt.runner_outcome().expect("the runner's outcome");
    assert_eq!(runner.attempts(), 3);
    assert_eq!(runner.stop_reason(), StopReason::AttemptsExhausted);
    // Two retries, both the runner's, labelled with the tool's call.
    let retries = events.retries();
    assert_eq!(
        retries.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(
        retries
            .iter()
            .all(|r| r.tool.as_deref() == Some("pay") && r.call_id.as_deref() == Some("call-9"))
    );
    assert_eq!(
        events.give_ups().len(),
        1,
        "one final event, from the invocation"
    );
    holder.release();
    assert_eq!(db.scalar("SELECT v FROM t"), 0);
}

/// One handler-level retry (run 1 fails outside the runner), then the runner's retries:
/// still `max_attempts` attempts of the work in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2_handler_and_runner_retries_share_one_budget() {
    let Locked { pool, holder, .. } = Locked::new(ONE_ROW).await; // never released
    let (runs, tx_attempts) = (Counter::default(), Counter::default());
    let events = Events::default();
    let toolbox = events.toolbox(4, runner_tool(&pool, &runs, &tx_attempts, true));

    let f = failure(call(&toolbox, "pay", "c").await);

    // Run 1: the raw write (1); run 2: the runner's three attempts (the budget's last 2
    // retries plus its free first attempt).
    assert_eq!(runs.get(), 2);
    assert_eq!(
        tx_attempts.get(),
        4,
        "max_attempts attempts of the work in all"
    );
    assert_eq!(f.retries(), 3);
    assert_eq!(f.attempts().len(), 2);
    assert!(
        f.attempts()[0].runner_outcome().is_none(),
        "run 1 failed outside any runner"
    );
    assert_eq!(
        f.attempts()[1].runner_outcome().map(|o| o.attempts()),
        Some(3)
    );
    // Every attempt of the work, flattened: run 1's, then run 2's runner's three, each
    // with its error's text; the event lists the same four.
    let history: Vec<_> = f.history().collect();
    assert_eq!(
        history.iter().map(|a| a.run()).collect::<Vec<_>>(),
        [1, 2, 2, 2]
    );
    assert!(
        history
            .iter()
            .all(|a| a.code() == BUSY && !a.message().is_empty())
    );
    assert_eq!(f.outcome().attempts(), 4);
    assert!(f.to_string().contains("after 4 attempts"), "{f}");
    let give_ups = events.give_ups();
    assert_eq!(give_ups.len(), 1);
    assert_eq!(give_ups[0].attempts, 4);
    assert_eq!(give_ups[0].listed.len(), 4);
    assert_eq!(
        events
            .retries()
            .iter()
            .map(|r| r.attempt)
            .collect::<Vec<_>>(),
        [1, 1, 2]
    );
    holder.release();
}
