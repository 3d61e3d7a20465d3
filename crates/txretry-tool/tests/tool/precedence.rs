//! Point 1: the tool's policy wins over the toolbox's, which wins over
//! `RetryPolicy::default()`; an absent tool policy falls through; `disabled()` means one
//! attempt; the level shows in the events.

use std::sync::Arc;

use serde_json::json;
use txretry_core::RetryPolicy;
use txretry_tool::{BoxError, FailureKind, Tool, Toolbox};

use crate::common::{
    BUSY, Counter, Db, Events, Holder, Locked, ONE_ROW, call, failure, fast, shared_tool,
};

/// A tool whose first run fails with a real SQLITE_BUSY (outside any runner), then
/// reports the policy it ran under: `(max_attempts, level, runs)`.
fn reporter(name: &str, pool: &sqlx::SqlitePool, holder: &Arc<Holder>, runs: &Counter) -> Tool {
    let shared = (pool.clone(), holder.clone(), runs.clone());
    shared_tool(name, "", shared, |ctx, (pool, holder, runs)| async move {
        let run = runs.bump();
        let r = sqlx::query("UPDATE t SET v = v + 1").execute(&pool).await;
        if run == 1 {
            holder.release();
        }
        r?;
        Ok::<_, BoxError>(json!([
            ctx.policy().max_attempts(),
            ctx.policy_level(),
            run
        ]))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_tool_policy_wins_over_toolbox_policy_which_wins_over_the_default() {
    let db = Db::new(ONE_ROW);
    let pool = db.pool().await;

    // Tool level, and toolbox level, in one toolbox.
    let holder = Arc::new(Holder::empty());
    let (own_runs, inherited_runs) = (Counter::default(), Counter::default());
    let events = Events::default();
    let toolbox = events
        .install(Toolbox::builder().policy(fast(3)))
        .tool(reporter("own", &pool, &holder, &own_runs).retry(fast(7)))
        .tool(reporter("inherited", &pool, &holder, &inherited_runs))
        .build()
        .unwrap();
    holder.arm(&db);
    let own = call(&toolbox, "own", "c-own").await.unwrap();
    assert_eq!(own, json!([7, "tool", 2]));
    holder.arm(&db);
    let inherited = call(&toolbox, "inherited", "c-inh").await.unwrap();
    assert_eq!(inherited, json!([3, "toolbox", 2]));

    // Default level: a toolbox without a policy.
    let default_runs = Counter::default();
    let toolbox = events
        .install(Toolbox::builder())
        .tool(reporter("fallback", &pool, &holder, &default_runs))
        .build()
        .unwrap();
    holder.arm(&db);
    let fallback = call(&toolbox, "fallback", "c-def").await.unwrap();
    assert_eq!(
        fallback,
        json!([RetryPolicy::default().max_attempts(), "default", 2])
    );

    // The level is in the events, with the attempt limit of that level.
    let seen: Vec<_> = events
        .retries()
        .into_iter()
        .map(|r| (r.tool.unwrap(), r.level.unwrap(), r.max_attempts, r.code))
        .collect();
    assert_eq!(
        seen,
        [
            ("own".to_owned(), "tool".to_owned(), 7, BUSY),
            ("inherited".to_owned(), "toolbox".to_owned(), 3, BUSY),
            ("fallback".to_owned(), "default".to_owned(), 2, BUSY),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p1_absent_tool_policy_falls_through_and_disabled_means_one_attempt() {
    let Locked { pool, holder, .. } = Locked::new(ONE_ROW).await; // never released: every write is busy
    let (disabled_runs, absent_runs) = (Counter::default(), Counter::default());
    let never = Arc::new(Holder::empty());
    let toolbox = Toolbox::builder()
        .policy(fast(4))
        .tool(reporter("disabled", &pool, &never, &disabled_runs).retry(RetryPolicy::disabled()))
        .tool(reporter("absent", &pool, &never, &absent_runs))
        .build()
        .unwrap();

    let disabled = failure(call(&toolbox, "disabled", "c1").await);
    let absent = failure(call(&toolbox, "absent", "c2").await);
    assert_eq!(absent.kind(), FailureKind::RetriesExhausted);

    assert_eq!(disabled_runs.get(), 1, "disabled(): one attempt, no retry");
    assert_eq!(disabled.kind(), FailureKind::RetriesExhausted);
    assert_eq!(
        absent_runs.get(),
        4,
        "no tool policy: the toolbox's 4 attempts, not 'no retries'"
    );
    holder.release();
}
