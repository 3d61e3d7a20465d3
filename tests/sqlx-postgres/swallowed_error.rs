//! A closure that swallows a real error that aborted the transaction
//! (`let _ = query.execute(&mut **tx).await;`), writes again, and returns `Ok`. Postgres
//! answers a plain `COMMIT` of an aborted transaction with a ROLLBACK tag and no error, so
//! a runner that just committed reported success for a transaction that wrote nothing. The
//! runner runs `SELECT 1` before COMMIT: it fails with 25P02, and that error comes back,
//! permanent, with everything the closure wrote rolled back.

use sqlx::PgConnection;
use tokio::sync::oneshot;
use txretry::{Isolation, Phase, StopReason, TxOptions, Verdict};

use crate::common::{
    Seen, code_of, connect, drop_table, exec, policy, setup, sql, sqlstate, table,
    wait_for_lock_wait, within,
};

async fn backend_pid(conn: &mut PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// The verdict on a swallowed error: the abort check's 25P02, permanent, in the body (the
/// COMMIT was never sent), on the first attempt.
#[track_caller]
fn assert_aborted_transaction(err: &txretry::TxError<sqlx::Error>) {
    assert_eq!(code_of(err.error()).as_deref(), Some("25P02"), "{err:?}");
    assert!(
        err.to_string().contains(
            "current transaction is aborted, commands ignored until end of transaction block"
        ),
        "{err}"
    );
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.code(), sqlstate("25P02"));
    assert_eq!(outcome.phase(), Phase::Body, "the COMMIT was never sent");
    assert_eq!(
        outcome.attempts(),
        1,
        "the cause was swallowed: not retried"
    );
    assert_eq!(outcome.stop_reason(), StopReason::NotRetryable);
    assert!(!outcome.may_have_committed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swallowed_deadlock_is_not_reported_as_success() {
    // The runner's pool has one connection: every call below runs on the same session.
    let Some((url, pool)) = setup("sqlx-postgres swallowed deadlock", 1).await else {
        return;
    };
    let mut observer = connect(&url).await;
    let t = table("swallowed");
    exec(
        &mut observer,
        format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL); INSERT INTO {t} VALUES (1, 0), (2, 0)"
        ),
    )
    .await;

    // Session B: once A holds row 1, lock row 2, then wait for row 1; add 10 to both and
    // commit. It checks for deadlocks only after 10 s, A after 100 ms: A is the victim.
    let mut b = connect(&url).await;
    exec(&mut b, "SET deadlock_timeout = '10s'".into()).await;
    let b_pid = backend_pid(&mut b).await;
    let (a_locked_tx, a_locked) = oneshot::channel::<()>();
    let b_sql = format!(
        "BEGIN;
         UPDATE {t} SET v = v + 10 WHERE id = 2;
         UPDATE {t} SET v = v + 10 WHERE id = 1;
         COMMIT;"
    );
    let session_b = tokio::spawn(async move {
        a_locked.await.unwrap();
        sqlx::raw_sql(sql(b_sql)).execute(&mut b).await.map(drop)
    });

    let seen = Seen::default();
    let policy = policy(5, &seen);
    let mut a_locked_tx = Some(a_locked_tx);
    let mut attempts = 0;
    let mut a_pid = None;
    // What the closure's ignored statements really returned, to prove the deadlock happened.
    let mut swallowed = Vec::new();
    let result = within(txretry::sqlx::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        a_pid = Some(backend_pid(tx).await);
        sqlx::query("SET LOCAL deadlock_timeout = '100ms'")
            .execute(&mut **tx)
            .await?;
        sqlx::query(sql(format!("UPDATE {t} SET v = v + 1 WHERE id = 1")))
            .execute(&mut **tx)
            .await?;
        if let Some(signal) = a_locked_tx.take() {
            signal.send(()).unwrap();
            // B holds row 2 and waits for row 1.
            wait_for_lock_wait(&mut observer, b_pid).await;
        }
        // The deadlock, swallowed…
        let r = sqlx::query(sql(format!("UPDATE {t} SET v = v + 1 WHERE id = 2")))
            .execute(&mut **tx)
            .await;
        swallowed.push(r.err().as_ref().and_then(code_of));
        // …and another write, its error swallowed too.
        let r = sqlx::query(sql(format!("INSERT INTO {t} VALUES (3, 1)")))
            .execute(&mut **tx)
            .await;
        swallowed.push(r.err().as_ref().and_then(code_of));
        Ok::<_, sqlx::Error>("transferred")
    }))
    .await;
    within(session_b)
        .await
        .unwrap()
        .expect("session B commits once A's transaction was aborted");

    // The closure really swallowed a deadlock, then a write refused in the aborted
    // transaction.
    assert_eq!(
        swallowed,
        [Some("40P01".to_owned()), Some("25P02".to_owned())]
    );
    let err = result.expect_err("an aborted transaction is not a success");
    assert_aborted_transaction(&err);
    assert_eq!(attempts, 1);
    assert!(seen.all().is_empty());

    // None of the closure's writes is in the table: only B's.
    let rows: Vec<(i32, i32)> = sqlx::query_as(sql(format!("SELECT id, v FROM {t} ORDER BY id")))
        .fetch_all(&mut observer)
        .await
        .unwrap();
    assert_eq!(
        rows,
        [(1, 10), (2, 10)],
        "only B's writes; the INSERT is not there"
    );

    // The runner rolled back and pooled the session: the next call commits on it.
    let (pid, v) = txretry::sqlx::transaction(&pool, &policy, async |tx| {
        let pid = backend_pid(tx).await;
        let v: i32 = sqlx::query_scalar(sql(format!(
            "UPDATE {t} SET v = v + 1 WHERE id = 1 RETURNING v"
        )))
        .fetch_one(&mut **tx)
        .await?;
        Ok::<_, sqlx::Error>((pid, v))
    })
    .await
    .expect("the next call commits");
    assert_eq!(Some(pid), a_pid, "the same session, rolled back and reused");
    assert_eq!(v, 11);
    drop_table(&pool, &t).await;
}

/// The same with a serialization failure (40001) under SERIALIZABLE: the closure reads a
/// row, another session updates it and commits, the closure's update of it fails and is
/// swallowed.
#[tokio::test]
async fn swallowed_serialization_failure_is_not_reported_as_success() {
    let Some((url, pool)) = setup("sqlx-postgres swallowed serialization", 1).await else {
        return;
    };
    let mut other = connect(&url).await;
    let t = table("swallowed_ser");
    exec(
        &mut other,
        format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL); INSERT INTO {t} VALUES (1, 0)"
        ),
    )
    .await;

    let seen = Seen::default();
    let policy = policy(5, &seen);
    let options = TxOptions::new().isolation(Isolation::Serializable);
    let mut attempts = 0;
    let mut swallowed = Vec::new();
    let result = within(txretry::sqlx::transaction_with(
        &pool,
        &policy,
        &options,
        async |tx| {
            attempts += 1;
            // Takes the transaction's snapshot.
            let v: i32 = sqlx::query_scalar(sql(format!("SELECT v FROM {t} WHERE id = 1")))
                .fetch_one(&mut **tx)
                .await?;
            exec(
                &mut other,
                format!("UPDATE {t} SET v = v + 100 WHERE id = 1"),
            )
            .await;
            let r = sqlx::query(sql(format!("UPDATE {t} SET v = $1 WHERE id = 1")))
                .bind(v + 1)
                .execute(&mut **tx)
                .await;
            swallowed.push(r.err().as_ref().and_then(code_of));
            let r = sqlx::query(sql(format!("INSERT INTO {t} VALUES (2, 1)")))
                .execute(&mut **tx)
                .await;
            swallowed.push(r.err().as_ref().and_then(code_of));
            Ok::<_, sqlx::Error>(v)
        },
    ))
    .await;

    assert_eq!(
        swallowed,
        [Some("40001".to_owned()), Some("25P02".to_owned())]
    );
    let err = result.expect_err("an aborted transaction is not a success");
    assert_aborted_transaction(&err);
    assert_eq!(attempts, 1);
    assert!(seen.all().is_empty());
    let rows: Vec<(i32, i32)> = sqlx::query_as(sql(format!("SELECT id, v FROM {t} ORDER BY id")))
        .fetch_all(&mut other)
        .await
        .unwrap();
    assert_eq!(rows, [(1, 100)], "only the other session's update");
    drop_table(&pool, &t).await;
}
