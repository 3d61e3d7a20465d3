//! The backend is terminated while it runs the runner's COMMIT. The COMMIT is made to wait
//! on the server for real (txretry-testkit's `HeldCommit`: a deferred constraint trigger
//! waits at COMMIT for an advisory lock another session holds); that session sees this
//! backend blocked with `COMMIT` in its query text and `pg_terminate_backend`s it. The
//! client gets 57P01 (or a closed connection) in answer to its COMMIT: it cannot know
//! whether the transaction committed, so the verdict is ambiguous and the closure is not
//! run again.

use txretry::{Code, KindSet, Phase, StopReason, Verdict};
use txretry_testkit::held_commit::HeldCommit;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_terminated_during_commit_is_ambiguous() {
    let Some(url) = url("tokio_postgres::commit_terminated") else {
        return;
    };
    let observer = connect(&url).await;
    let t = table("tp_commit_killed");
    observer
        .batch_execute(&format!("CREATE TABLE {t} (note text NOT NULL)"))
        .await
        .expect("create table");
    let mut held = HeldCommit::install(&url, &t).await;

    let mut client = connect(&url).await;
    let pid = backend_pid(&client).await;
    let killer = held.terminate_in_commit();

    let (policy, seen) = recording(5);
    let policy = policy.retry_on(KindSet::ALL).build().unwrap();
    let mut attempts = 0;
    let err = txretry::tokio_postgres::transaction(&mut client, &policy, async |tx| {
        attempts += 1;
        tx.execute(&format!("INSERT INTO {t} VALUES ('order 19')"), &[])
            .await
    })
    .await
    .expect_err("the backend was terminated during COMMIT");
    assert_eq!(
        killer.await.unwrap().pid,
        pid,
        "the runner's backend was terminated in its COMMIT"
    );
    eprintln!("commit_terminated: the runner returned {err:?}");

    // The server's 57P01 (admin_shutdown), or the driver's "connection closed" / I/O error.
    let code = err.error().code().cloned();
    assert!(
        code.as_ref() == Some(&tokio_postgres::error::SqlState::ADMIN_SHUTDOWN)
            || err.error().is_closed()
            || code.is_none(),
        "{err:?}"
    );
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Ambiguous, "{outcome:?}");
    assert!(outcome.may_have_committed());
    assert!(
        outcome.code() == Some(sqlstate("57P01"))
            || matches!(outcome.code(), Some(Code::Driver(_))),
        "{outcome:?}"
    );
    assert_eq!(outcome.phase(), Phase::Commit);
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.stop_reason(), StopReason::ConnectionUnusable);
    assert_eq!(attempts, 1, "an ambiguous COMMIT is not run again");
    assert!(seen.retried().is_empty());

    // The trigger never got its lock, so the COMMIT never completed: the server rolled the
    // transaction back when the backend exited. (The client could not know that.) The lock
    // is free by now: nothing is holding the row back.
    let rows: i64 = observer
        .query_one(&format!("SELECT count(*) FROM {t}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "the row did not land");

    drop_tables(&observer, &[&t]).await;
    held.remove().await;
}
