//! A tool call under a failover budget, its handler's runner meeting a database that
//! refuses every connection (nothing listens on port 1 of loopback: no server needed).
//! The runner, given `ctx.policy()`, rides the outage out for the whole budget and gives
//! up; the call gives up with it. (The call's own loop started the outage's clock again:
//! the handler ran two or three times, and the call lasted that many budgets.)

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use txretry_core::{RetryPolicy, StopReason, TransientKind, Verdict};
use txretry_tool::{BoxError, Toolbox};

use crate::common::{Counter, call, failure, shared_tool};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_outlasted_the_failover_budget_ends_the_call() {
    let pool = PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(50))
        .connect_lazy("postgres://nobody@127.0.0.1:1/none")
        .unwrap();
    let runs = Counter::default();
    let tool = shared_tool(
        "pay",
        "",
        (pool, runs.clone()),
        |ctx, (pool, runs)| async move {
            runs.bump();
            txretry_sqlx::transaction(&pool, ctx.policy(), async |tx| {
                sqlx::query("SELECT 1").execute(&mut **tx).await.map(drop)
            })
            .await?;
            Ok::<_, BoxError>("paid")
        },
    );
    let policy = RetryPolicy::builder()
        .failover(Duration::from_millis(300))
        .build()
        .unwrap();
    let toolbox = Toolbox::builder()
        .policy(policy)
        .tool(tool)
        .build()
        .unwrap();

    let f = failure(call(&toolbox, "pay", "c").await);
    assert_eq!(runs.get(), 1, "the handler ran once");
    assert_eq!(f.outcome().stop_reason(), StopReason::OutageExceeded);
    assert_eq!(
        f.outcome().verdict(),
        Verdict::Transient(TransientKind::Connection)
    );
}
