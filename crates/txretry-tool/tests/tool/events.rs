//! Point 7: the toolbox's hooks receive every retry — the invocation's (the handler runs
//! again) and the runners' (a transaction runs again) — labelled with the tool, the call id
//! and the policy level, and one final event when the call gives up.

use txretry_core::{StopReason, TransientKind, Verdict};
use txretry_tool::{BoxError, FailureKind, Toolbox};

use crate::common::{BUSY, Counter, Events, Locked, call, failure, fast, runner_bump, shared_tool};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p7_hooks_get_handler_and_runner_retries_with_labels_and_one_give_up() {
    let schema = "CREATE TABLE t (v INTEGER NOT NULL); INSERT INTO t VALUES (0);";
    let Locked { pool, holder, .. } = Locked::new(schema).await; // never released
    let runs = Counter::default();
    let tool = shared_tool(
        "settle",
        "",
        (pool.clone(), runs.clone()),
        |ctx, (pool, runs)| async move {
            if runs.bump() == 1 {
                // Handler level: outside any runner.
                sqlx::query("UPDATE t SET v = v + 1").execute(&pool).await?;
            }
            // Runner level.
            runner_bump(&pool, ctx.policy(), Counter::default(), None).await?;
            Ok::<_, BoxError>(())
        },
    )
    .retry(fast(3));
    let events = Events::default();
    let toolbox = events
        .install(Toolbox::builder())
        .tool(tool)
        .build()
        .unwrap();

    let f = failure(call(&toolbox, "settle", "call-42").await);

    assert_eq!(f.kind(), FailureKind::RetriesExhausted);
    let retries = events.retries();
    // The invocation's retry after run 1, then the runner's after its attempt 1; its
    // attempt 2 found the budget spent.
    assert_eq!(retries.len(), 2, "{retries:?}");
    for retry in &retries {
        assert_eq!(retry.attempt, 1);
        assert_eq!(retry.max_attempts, 3);
        assert_eq!(retry.verdict, Verdict::Transient(TransientKind::Busy));
        assert_eq!(retry.code, BUSY);
        assert_eq!(retry.tool.as_deref(), Some("settle"));
        assert_eq!(retry.call_id.as_deref(), Some("call-42"));
        assert_eq!(retry.level.as_deref(), Some("tool"));
    }
    let give_ups = events.give_ups();
    assert_eq!(give_ups.len(), 1, "one final event per call: {give_ups:?}");
    assert_eq!(give_ups[0].tool.as_deref(), Some("settle"));
    assert_eq!(give_ups[0].call_id.as_deref(), Some("call-42"));
    assert_eq!(give_ups[0].reason, StopReason::AttemptsExhausted);
    assert_eq!(give_ups[0].verdict, Verdict::Transient(TransientKind::Busy));
    // Every attempt under the call's budget: run 1's own write, then run 2's runner's two.
    assert_eq!(give_ups[0].attempts, 3);
    assert!(give_ups[0].outcome_matches, "{give_ups:?}");
    let busy = (Verdict::Transient(TransientKind::Busy), BUSY);
    assert_eq!(
        (give_ups[0].listed.iter())
            .map(|(verdict, _, code, _)| (*verdict, *code))
            .collect::<Vec<_>>(),
        [busy; 3]
    );
    assert_eq!(
        f.history().map(|a| a.run()).collect::<Vec<_>>(),
        [1, 2, 2],
        "the failure lists the same attempts, by run"
    );
    assert!(f.to_string().contains("after 3 attempts"), "{f}");
    holder.release();
}
