//! The backend is terminated while it runs the runner's COMMIT. The COMMIT is made to wait
//! on the server for real: a deferred constraint trigger runs at COMMIT and waits for an
//! advisory lock another session holds; the test sees the backend waiting with `COMMIT` in
//! its query text, then `pg_terminate_backend`s it. The client gets 57P01 (or a closed
//! connection) in answer to its COMMIT: it cannot know whether the transaction committed,
//! so the verdict is ambiguous and the closure is not run again.

use std::time::Duration;

use txretry::{Code, KindSet, Phase, StopReason, Verdict};

use crate::common::*;

/// Waits until session `pid` is running a query that contains `COMMIT` and is blocked on a
/// lock. Polls; panics after 30 s so a broken setup fails instead of hanging.
///
/// A loop rather than `poll_until`: this runs in a spawned task, and a future holding an
/// async closure that borrows is not `Send` there (rust-lang/rust#110338).
async fn wait_for_blocked_commit(observer: &tokio_postgres::Client, pid: i32) {
    for _ in 0..3000 {
        let blocked: bool = observer
            .query_one(
                "SELECT coalesce(bool_or(state = 'active' AND query LIKE '%COMMIT%' \
                                         AND wait_event_type = 'Lock'), false) \
                 FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .expect("poll pg_stat_activity")
            .get(0);
        if blocked {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("session {pid} never blocked in its COMMIT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_terminated_during_commit_is_ambiguous() {
    let Some(url) = url("tokio_postgres::commit_terminated") else {
        return;
    };
    let observer = connect(&url).await;
    let t = table("tp_commit_killed");
    let block = format!("{t}_block");
    // The trigger waits at COMMIT for the advisory lock `key`, which the observer holds.
    observer
        .batch_execute(&format!(
            "CREATE TABLE {t} (note text NOT NULL);
             CREATE FUNCTION {block}() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 PERFORM pg_advisory_xact_lock(hashtext('{t}'));
                 RETURN NULL;
             END $$;
             CREATE CONSTRAINT TRIGGER {t}_at_commit AFTER INSERT ON {t}
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {block}();
             SELECT pg_advisory_lock(hashtext('{t}'));"
        ))
        .await
        .expect("set up the blocking trigger");

    let mut client = connect(&url).await;
    let pid = backend_pid(&client).await;
    let killer = {
        let killer = connect(&url).await;
        tokio::spawn(async move {
            wait_for_blocked_commit(&killer, pid).await;
            let killed: bool = killer
                .query_one("SELECT pg_terminate_backend($1)", &[&pid])
                .await
                .expect("pg_terminate_backend")
                .get(0);
            killed
        })
    };

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
    assert!(killer.await.unwrap(), "the backend was terminated");
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
    // transaction back when the backend exited. (The client could not know that.)
    let rows: i64 = observer
        .query_one(&format!("SELECT count(*) FROM {t}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 0, "the row did not land");

    observer
        .batch_execute(&format!(
            "SELECT pg_advisory_unlock(hashtext('{t}'));
             DROP TABLE {t};
             DROP FUNCTION {block}();"
        ))
        .await
        .expect("clean up");
}
