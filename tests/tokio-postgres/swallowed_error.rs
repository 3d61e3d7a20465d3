//! A closure that swallows a real deadlock (`let _ = tx.execute(…).await;`) and returns `Ok`.
//! Postgres answers a plain `COMMIT` of the aborted transaction with a ROLLBACK and no
//! error, so a runner that committed with `COMMIT` alone reported success for a transaction
//! that wrote nothing. The runner commits with `SELECT 1; COMMIT`: the `SELECT` fails with
//! 25P02, the runner rolls back and returns that error.

use tokio_postgres::error::SqlState;
use txretry::{Phase, StopReason, Verdict};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swallowed_deadlock_is_not_reported_as_success() {
    let Some(url) = url("tokio_postgres::swallowed_deadlock") else {
        return;
    };
    let observer = connect(&url).await;
    let t = table("tp_swallowed");
    create_rows(&observer, &t, 2).await;

    let (mut a, mut deadlock) = Deadlock::stage(&url, &t).await;
    let a_pid = backend_pid(&a).await;

    let (policy, seen) = recording(5);
    let policy = policy.build().unwrap();
    let mut attempts = 0;
    // What the closure's ignored statements really returned, to prove the deadlock happened.
    let mut swallowed = Vec::new();
    let result = txretry::tokio_postgres::transaction(&mut a, &policy, async |tx| {
        attempts += 1;
        tx.execute(&format!("UPDATE {t} SET v = v + 1 WHERE id = 1"), &[])
            .await?;
        deadlock.a_holds_row_1(&observer).await;
        // The deadlock, swallowed (noting its code, to prove it happened)…
        let _ = tx
            .execute(&format!("UPDATE {t} SET v = v + 1 WHERE id = 2"), &[])
            .await
            .inspect_err(|e| swallowed.push(e.code().cloned()));
        // …and another write, its error swallowed too.
        let _ = tx
            .execute(&format!("INSERT INTO {t} (id, v) VALUES (3, 1)"), &[])
            .await
            .inspect_err(|e| swallowed.push(e.code().cloned()));
        Ok::<_, tokio_postgres::Error>("transferred")
    })
    .await;
    deadlock.b_commits().await;

    // The closure really swallowed a deadlock, then a write refused in the aborted
    // transaction.
    assert_eq!(
        swallowed,
        vec![
            Some(SqlState::T_R_DEADLOCK_DETECTED),
            Some(SqlState::IN_FAILED_SQL_TRANSACTION)
        ]
    );

    let err = result.expect_err("an aborted transaction is not a success");
    assert_eq!(
        err.error().code(),
        Some(&SqlState::IN_FAILED_SQL_TRANSACTION),
        "{err:?}"
    );
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.code(), Some(sqlstate("25P02")));
    assert_eq!(outcome.phase(), Phase::Body, "the COMMIT never ran");
    assert_eq!(
        outcome.attempts(),
        1,
        "the cause was swallowed: not retried"
    );
    assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);
    assert!(!outcome.may_have_committed());
    assert_eq!(attempts, 1);
    assert!(seen.retried().is_empty());

    // None of the closure's writes is in the table: only B's.
    assert_eq!(value(&observer, &t, 1).await, 10);
    assert_eq!(value(&observer, &t, 2).await, 10);
    let rows: i64 = observer
        .query_one(&format!("SELECT count(*) FROM {t}"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 2, "the INSERT was not committed");

    // A's session is usable and outside any transaction: the runner rolled back.
    assert!(!a.is_closed());
    let state: String = observer
        .query_one(
            "SELECT state FROM pg_stat_activity WHERE pid = $1",
            &[&a_pid],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(state, "idle", "not 'idle in transaction (aborted)'");
    let savepoint = a
        .batch_execute("SAVEPOINT inside")
        .await
        .expect_err("SAVEPOINT only works inside a transaction block");
    assert_eq!(
        savepoint.code(),
        Some(&SqlState::NO_ACTIVE_SQL_TRANSACTION),
        "{savepoint:?}"
    );
    let v: i64 = txretry::tokio_postgres::transaction(&mut a, &policy, async |tx| {
        let row = tx
            .query_one(
                &format!("UPDATE {t} SET v = v + 1 WHERE id = 1 RETURNING v"),
                &[],
            )
            .await?;
        Ok::<i64, tokio_postgres::Error>(row.get(0))
    })
    .await
    .expect("the next call commits");
    assert_eq!(v, 11);
    assert_eq!(value(&observer, &t, 1).await, 11);
    drop_tables(&observer, &[&t]).await;
}
