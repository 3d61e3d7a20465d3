//! The connection dies mid-transaction (the backend is terminated). The runner cannot open
//! another connection on the caller's client, so it returns the error at once, even under a
//! policy that retries connection failures, and the client reports itself closed.

use txretry::{Code, KindSet, Phase, StopReason, TransientKind, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_failure_is_returned_without_retry() {
    let Some((url, observer, t)) =
        observed_row("tokio_postgres::connection_lost", "tp_conn_lost").await
    else {
        return;
    };

    let mut client = connect(&url).await;
    let pid = backend_pid(&client).await;
    let (policy, seen) = recording(5);
    let policy = policy.retry_on(KindSet::ALL).build().unwrap();
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        attempts += 1;
        bump_around_termination(tx, &observer, &t, Some(pid)).await
    })
    .await
    .expect_err("the connection is gone");

    assert_eq!(attempts, 1, "no retry on a client that cannot reconnect");
    assert!(
        seen.retried().is_empty(),
        "not even a BEGIN on the closed client was tried"
    );
    let classification = txretry::classify(err.error());
    // Either the server's 57P01 (admin_shutdown: `Failover`) or, when the connection task
    // consumed that FATAL first, the driver's "connection closed" (`Connection`).
    assert!(
        matches!(
            classification.verdict,
            Verdict::Transient(TransientKind::Failover | TransientKind::Connection)
        ),
        "{err:?}"
    );
    assert!(
        matches!(classification.code, Some(Code::Driver(_)))
            || classification.code == Some(sqlstate("57P01")),
        "{err:?}"
    );
    // The runner judged it the same way, in the body, and stopped because its one client
    // is gone — not because the policy refused.
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), classification.verdict, "{outcome:?}");
    assert_eq!(outcome.code(), classification.code, "{outcome:?}");
    assert_eq!(outcome.phase(), Phase::Body);
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.stop_reason(), StopReason::ConnectionUnusable);
    assert!(!outcome.may_have_committed(), "COMMIT was never sent");
    wait_until_closed(&client).await;
    assert_eq!(
        value(&observer, &t, 1).await,
        0,
        "the server rolled the transaction back"
    );
    drop_tables(&observer, &[&t]).await;
}
