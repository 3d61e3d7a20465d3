//! The tokio-postgres runner through PgBouncer in transaction-pooling mode
//! (`TXRETRY_PGBOUNCER_URL`, or a container in front of the test server; see
//! txretry-testkit's `pgbouncer_url`). Ignored by the plain test run (no pooler there, and a
//! skipped test must not count as passed); `.ci/containers` runs them with
//! `--include-ignored` and `TXRETRY_REQUIRE_POOLER=1`.
//!
//! What works in transaction mode: everything a runner does inside its transaction —
//! tokio-postgres prepares a named statement and runs it on the same server connection,
//! and `SET LOCAL` lasts until COMMIT. What does not: a named prepared statement or a
//! session `SET` made outside a transaction (the next statement may run on another server
//! connection). The COMMIT boundary: when the pooler's link to the server is cut while
//! COMMIT waits, the client cannot know the outcome: Ambiguous, not run again, nothing
//! written twice.
#![cfg(feature = "tokio-postgres")]

#[allow(dead_code, unused_imports)] // the helpers this file does not use
#[path = "tokio-postgres/common.rs"]
mod common;

use crate::common::*;

fn pooler(test: &str) -> Option<(String, String)> {
    let pooled = txretry_testkit::pgbouncer_url(test)?;
    let direct = txretry_testkit::postgres_url(test)?;
    Some((pooled, direct))
}

/// A runner's transaction through the pooler: prepared statements and `SET LOCAL` inside
/// it work; a session `SET` does not follow the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PgBouncer: .ci/containers runs it with --include-ignored"]
async fn runner_transactions_work_through_transaction_pooling() {
    let Some((pooled, direct)) = pooler("pgbouncer::runner_transactions") else {
        return;
    };
    let observer = connect(&direct).await;
    let t = table("pgb_runner");
    observer
        .batch_execute(&format!("CREATE TABLE {t} (id int PRIMARY KEY, note text)"))
        .await
        .expect("create table");

    let mut client = connect(&pooled).await;
    let policy = txretry::RetryPolicy::builder()
        .max_attempts(3)
        .build()
        .unwrap();
    for id in 0..20 {
        let timeout: String =
            txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
                tx.batch_execute("SET LOCAL statement_timeout = '5s'")
                    .await?;
                // A named prepared statement, prepared and run on this transaction's server link.
                let insert = tx
                    .prepare(&format!("INSERT INTO {t} VALUES ($1, 'pooled')"))
                    .await?;
                tx.execute(&insert, &[&id]).await?;
                let row = tx.query_one("SHOW statement_timeout", &[]).await?;
                Ok::<_, tokio_postgres::Error>(row.get::<_, String>(0))
            })
            .await
            .expect("a transaction through the pooler");
        assert_eq!(timeout, "5s", "SET LOCAL lasts for the transaction");
    }
    let rows: i64 = observer
        .query_one(&format!("SELECT count(*) FROM {t}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 20);
    observer
        .batch_execute(&format!("DROP TABLE {t}"))
        .await
        .expect("clean up");
}

/// The pooler's server link is cut (`pg_terminate_backend` on the server connection that
/// PgBouncer lent the transaction) while COMMIT waits in txretry-testkit's `HeldCommit`
/// trigger for an advisory lock a direct session holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a PgBouncer: .ci/containers runs it with --include-ignored"]
async fn server_link_cut_during_commit_is_ambiguous() {
    let Some((pooled, direct)) = pooler("pgbouncer::commit_cut") else {
        return;
    };
    let t = table("pgb_commit_cut");
    // PgBouncer passes application_name on to the server connection it lends: that is how
    // the test knows the backend terminated was the one serving this client's transaction.
    let sep = if pooled.contains('?') { '&' } else { '?' };
    let mut client = connect(&format!("{pooled}{sep}application_name={t}")).await;
    let terminated = commit_terminated(&direct, &t, &mut client).await;
    assert_eq!(
        terminated.application_name, t,
        "the server connection serving this client was terminated in its COMMIT"
    );
}
