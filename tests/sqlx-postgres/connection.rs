//! A connection that dies inside the transaction (the server terminates the session:
//! 57P01): the kind is `Failover`, retried only when the policy opts in, and the next
//! attempt runs on a fresh connection.

use std::time::Duration;

use txretry::{Backoff, KindSet, Phase, RetryPolicy, StopReason, TransientKind, Verdict};

use crate::common::{code_of, drop_table, exec, setup, sql, sqlstate, table, within};

#[tokio::test]
async fn terminated_session_is_discarded_and_retried_when_opted_in() {
    let Some((_, pool)) = setup("sqlx-postgres connection", 1).await else {
        return;
    };
    let t = table("conn");
    exec(&pool, format!("CREATE TABLE {t} (id int PRIMARY KEY)")).await;

    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::Constant(Duration::from_millis(1)))
        .retry_on(KindSet::DEFAULT.with(TransientKind::Failover))
        .build()
        .unwrap();
    let mut pids = Vec::new();
    let mut in_closure = None;
    within(txretry::sqlx::transaction(&pool, &policy, async |tx| {
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut **tx)
            .await?;
        pids.push(pid);
        if pids.len() == 1 {
            let r = sqlx::query("SELECT pg_terminate_backend(pg_backend_pid())")
                .execute(&mut **tx)
                .await;
            let err = r.as_ref().expect_err("the session was terminated");
            in_closure = Some(txretry::classify(err));
            r?;
        }
        sqlx::query(sql(format!("INSERT INTO {t} VALUES (1)")))
            .execute(&mut **tx)
            .await?;
        Ok::<_, sqlx::Error>(())
    }))
    .await
    .unwrap();

    let c = in_closure.unwrap();
    assert_eq!(c.verdict, Verdict::Transient(TransientKind::Failover));
    assert_eq!(c.code, sqlstate("57P01"), "admin_shutdown");
    assert_eq!(pids.len(), 2);
    assert_ne!(
        pids[0], pids[1],
        "the second attempt ran on a new connection"
    );
    let n: i64 = sqlx::query_scalar(sql(format!("SELECT count(*) FROM {t}")))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(n, 1);

    // The default policy recognises the kind but does not retry it.
    let mut calls = 0;
    let err = txretry::sqlx::transaction(&pool, &RetryPolicy::default(), async |tx| {
        calls += 1;
        sqlx::query("SELECT pg_terminate_backend(pg_backend_pid())")
            .execute(&mut **tx)
            .await
            .map(drop)
    })
    .await
    .unwrap_err();
    assert_eq!(calls, 1);
    assert_eq!(code_of(err.error()).as_deref(), Some("57P01"), "{err:?}");
    assert_eq!(
        txretry::classify(err.error()).verdict,
        Verdict::Transient(TransientKind::Failover)
    );
    let outcome = err.outcome();
    assert_eq!(
        outcome.verdict(),
        Verdict::Transient(TransientKind::Failover),
        "{outcome:?}"
    );
    assert_eq!(outcome.code(), sqlstate("57P01"));
    assert_eq!(outcome.phase(), Phase::Body, "the COMMIT was never sent");
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);
    assert!(!outcome.may_have_committed());
    drop_table(&pool, &t).await;
}
