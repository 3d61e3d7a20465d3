//! A COMMIT in flight when the primary goes away. The COMMIT is made to wait on the server
//! for real (a deferred constraint trigger waits for an advisory lock an observer holds),
//! then the cluster takes the fault. The client cannot know whether the commit landed:
//! Ambiguous, and never run again unless the call is idempotent. (Here it did not land:
//! the trigger never got its lock. A COMMIT that did land is the `once` and history
//! tests' case.)

use txretry::tokio_postgres::Reconnecting;
use txretry::{Phase, RetryPolicy, StopReason, TxOptions, Verdict};

use crate::common::*;

/// Holds the lock the COMMIT will wait for, then injects `fault` once a COMMIT blocks.
async fn fault_once_commit_blocks(
    cluster: &Cluster,
    t: &str,
    fault: Kind,
) -> tokio::task::JoinHandle<Fault> {
    let observer = cluster.leader_conn().await;
    let lock = blocking_commit_table(&observer, t).await;
    exec(&observer, &lock).await;
    tokio::spawn(async move {
        wait_for_blocked_commit(&observer).await;
        fault.inject().await
    })
}

async fn rows(cluster: &Cluster, t: &str) -> i64 {
    let leader = cluster.leader_conn().await;
    count(&leader, &format!("SELECT count(*) FROM {t}")).await
}

async fn sqlx_commit(fault: Kind, idempotent: bool) {
    let Some(cluster) = cluster("ha::commit::sqlx").await else {
        return;
    };
    let t = table("ha_commit_sqlx");
    let injected = fault_once_commit_blocks(&cluster, &t, fault).await;
    let pool = cluster.pool(4).await;
    let options = TxOptions::new().idempotent(idempotent);
    let mut calls = 0;
    let result = txretry::sqlx::transaction_with(
        &pool,
        &RetryPolicy::high_availability(),
        &options,
        async |tx| {
            calls += 1;
            sqlx::query(sql(format!("INSERT INTO {t} VALUES ('order 19')")))
                .execute(&mut **tx)
                .await
                .map(drop)
        },
    )
    .await;
    let f = injected.await.unwrap();
    eprintln!("ha::commit::sqlx: {fault:?} {f:?}: {result:?}");
    check(result.map_err(|e| e.outcome().clone()), calls, idempotent);
    let leader = cluster.leader_conn().await;
    assert_eq!(
        rows(&cluster, &t).await,
        i64::from(idempotent),
        "the row once, or not at all"
    );
    drop_tables(&leader, &[&t]).await;
}

async fn tokio_postgres_commit(fault: Kind, idempotent: bool) {
    let Some(cluster) = cluster("ha::commit::tokio_postgres").await else {
        return;
    };
    let t = table("ha_commit_tp");
    let injected = fault_once_commit_blocks(&cluster, &t, fault).await;
    let mut db = Reconnecting::new(cluster.multi_host.parse().unwrap());
    let options = TxOptions::new().idempotent(idempotent);
    let mut calls = 0;
    let result = db
        .transaction_with(&RetryPolicy::high_availability(), &options, async |tx| {
            calls += 1;
            tx.execute(&format!("INSERT INTO {t} VALUES ('order 19')"), &[])
                .await
                .map(drop)
        })
        .await;
    let f = injected.await.unwrap();
    eprintln!("ha::commit::tokio_postgres: {fault:?} {f:?}: {result:?}");
    check(result.map_err(|e| e.outcome().clone()), calls, idempotent);
    let leader = cluster.leader_conn().await;
    assert_eq!(
        rows(&cluster, &t).await,
        i64::from(idempotent),
        "the row once, or not at all"
    );
    drop_tables(&leader, &[&t]).await;
}

/// Not idempotent: one attempt, Ambiguous at COMMIT. Idempotent: run again on the new
/// primary, committed.
fn check(result: Result<(), txretry::Outcome>, calls: u32, idempotent: bool) {
    if idempotent {
        result.expect("an idempotent call runs again and commits");
        assert!(calls >= 2, "{calls}");
        return;
    }
    let outcome = result.expect_err("the COMMIT's answer was lost");
    assert_eq!(outcome.verdict(), Verdict::Ambiguous, "{outcome:?}");
    assert_eq!(outcome.phase(), Phase::Commit);
    assert!(outcome.may_have_committed());
    assert_eq!(outcome.attempts(), 1);
    assert!(
        matches!(
            outcome.stop_reason(),
            StopReason::NotRetryable | StopReason::ConnectionUnusable
        ),
        "{outcome:?}"
    );
    assert_eq!(calls, 1, "an ambiguous COMMIT is not run again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn sqlx_commit_in_flight_during_a_switchover_is_ambiguous_and_not_run_again() {
    sqlx_commit(Kind::Switchover, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn sqlx_commit_in_flight_during_a_kill_9_failover_is_ambiguous_and_not_run_again() {
    sqlx_commit(Kind::Failover, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn sqlx_idempotent_commit_in_flight_during_a_switchover_runs_again_on_the_new_primary() {
    sqlx_commit(Kind::Switchover, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn tokio_postgres_commit_in_flight_during_a_switchover_is_ambiguous_and_not_run_again() {
    tokio_postgres_commit(Kind::Switchover, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn tokio_postgres_commit_in_flight_during_a_kill_9_failover_is_ambiguous_and_not_run_again() {
    tokio_postgres_commit(Kind::Failover, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: .ci/run starts it"]
async fn tokio_postgres_idempotent_commit_in_flight_during_a_failover_runs_again_on_the_new_primary()
 {
    tokio_postgres_commit(Kind::Failover, true).await;
}
