//! The server ends the session after the closure's last statement and before the runner's
//! `SELECT 1; COMMIT` goes out (a switchover's fast shutdown of a primary whose sessions sit
//! idle in their transactions). The COMMIT was never sent, so the server rolled the
//! transaction back and running it again is safe: a failure before COMMIT (`Connection`,
//! phase Body), not an ambiguous commit. A `Reconnecting` client under a failover budget
//! runs it again on a new session, once; the plain runner reports it without claiming the
//! write may have landed.

use txretry::tokio_postgres::Reconnecting;
use txretry::{Phase, RetryPolicy, StopReason, TransientKind, Verdict};
use txretry_testkit::wait::poll_until;

use crate::common::*;

/// The body: adds 1 to row 1 of `t`; on the attempt that `terminate`s, has `observer` end
/// this backend and waits until the client's connection task has read the server's FATAL
/// and closed, so that the runner's commit finds the connection already gone.
async fn bump_then_lose_the_session(
    tx: &tokio_postgres::Transaction<'_>,
    observer: &tokio_postgres::Client,
    t: &str,
    terminate: bool,
) -> Result<u64, tokio_postgres::Error> {
    let bumped = tx
        .execute(&format!("UPDATE {t} SET v = v + 1 WHERE id = 1"), &[])
        .await?;
    if terminate {
        let pid: i32 = tx.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
        let ended: bool = observer
            .query_one("SELECT pg_terminate_backend($1)", &[&pid])
            .await?
            .get(0);
        assert!(ended, "backend {pid} was not terminated");
        poll_until("the client never saw its session end", async || {
            tx.client().is_closed()
        })
        .await;
    }
    Ok(bumped)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnecting_client_runs_it_again_once() {
    let Some((url, observer, t)) = observed_row(
        "tokio_postgres::terminated_before_commit",
        "tp_ended_before_commit",
    )
    .await
    else {
        return;
    };

    let mut db = Reconnecting::new(url.parse().unwrap());
    let (policy, seen) = riding_out_a_lost_session();
    let mut attempts = 0;
    db.transaction(&policy, async |tx| {
        attempts += 1;
        bump_then_lose_the_session(tx, &observer, &t, attempts == 1).await
    })
    .await
    .expect("the second attempt commits on a new session");

    assert_eq!(attempts, 2);
    assert_eq!(value(&observer, &t, 1).await, 1, "one effect");
    // COMMIT was never sent.
    assert_one_lost_session_in_the_body(&seen, |kind| kind == TransientKind::Connection);
    drop_tables(&observer, &[&t]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plain_runner_reports_a_rollback_not_an_unknown_commit() {
    let Some((url, observer, t)) = observed_row(
        "tokio_postgres::terminated_before_commit_plain",
        "tp_ended_before_commit_plain",
    )
    .await
    else {
        return;
    };

    let mut client = connect(&url).await;
    let policy = RetryPolicy::high_availability();
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        attempts += 1;
        bump_then_lose_the_session(tx, &observer, &t, true).await
    })
    .await
    .expect_err("the runner's one client is gone");

    assert_eq!(attempts, 1);
    let outcome = err.outcome();
    assert_eq!(outcome.phase(), Phase::Body, "{outcome:?}");
    assert_eq!(
        outcome.verdict(),
        Verdict::Transient(TransientKind::Connection),
        "{outcome:?}"
    );
    assert_eq!(outcome.stop_reason(), StopReason::ConnectionUnusable);
    assert!(!outcome.may_have_committed(), "{outcome:?}");
    assert_eq!(
        value(&observer, &t, 1).await,
        0,
        "rolled back by the server"
    );
    drop_tables(&observer, &[&t]).await;
}
