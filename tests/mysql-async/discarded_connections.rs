//! Connections whose session state is unknown are closed, not returned to the pool: one
//! whose `START TRANSACTION` failed, and one whose attempt was cancelled mid-statement.
//!
//! Each test uses a pool of exactly one connection that is not reset between uses
//! (`reset_connection=false`), so "the next caller gets the same session" is exactly what
//! a pooled connection would mean, and a direct connection outside the pool watches
//! `information_schema.processlist`. Tested on MariaDB 10.11.

use mysql_async::TxOpts;
use mysql_async::prelude::*;
use tokio::sync::watch;
use txretry::{Code, KindSet, Phase, RetryPolicy, StopReason, Verdict};

use crate::common::*;

/// ER_XAER_RMFAIL: "The command cannot be executed when global transaction is in the
/// ACTIVE state".
const XAER_RMFAIL: u16 = 1399;

/// A session left inside an XA transaction (`XA START`, which mysql_async does not track
/// as a transaction) is handed out by the pool as it is; the runner's `START TRANSACTION`
/// on it fails with 1399. The runner returns that error once (permanent, before COMMIT) and
/// closes the connection: the session disappears from the server, and the next call gets a
/// fresh connection and commits. Pooled instead (the behaviour before this change), the
/// same session would come back and every later call would fail at BEGIN the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn begin_failure_discards_the_connection() {
    let Some(url) = url("mysql_async::begin_failure_discards_the_connection") else {
        return;
    };
    let pool = single_connection_pool(&url);
    let mut observer = direct_conn(&url).await;
    let t = table("my_begin_fails");
    create_rows(&mut observer, &t, 1).await;

    // Leave the pool's one session inside an XA transaction.
    let xid = table("txretry_xa");
    let mut conn = pool.get_conn().await.unwrap();
    let stuck = connection_id(&mut conn).await;
    conn.query_drop(format!("XA START '{xid}'")).await.unwrap();
    drop(conn);
    // The setup is what the test says: the pool hands the same session back, and BEGIN
    // fails on it with 1399.
    let mut conn = pool.get_conn().await.unwrap();
    assert_eq!(connection_id(&mut conn).await, stuck, "one pooled session");
    let err = conn
        .query_drop("START TRANSACTION")
        .await
        .expect_err("BEGIN inside XA ACTIVE");
    assert_eq!(errno(&err), Some(XAER_RMFAIL), "{err:?}");
    drop(conn);

    // Even a policy that retries every transient kind returns a permanent error once.
    let (policy, seen) = recording(5);
    let policy = policy.retry_on(KindSet::ALL).build().unwrap();
    let mut calls = 0;
    let err = txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        calls += 1;
        tx.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
            .await
    })
    .await
    .expect_err("START TRANSACTION fails");
    assert_eq!(errno(err.error()), Some(XAER_RMFAIL), "{err:?}");
    assert_eq!(calls, 0, "the closure never ran");
    assert!(seen.retried().is_empty());
    assert_outcome(
        &err,
        Verdict::Permanent,
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), Some(Code::MySql(XAER_RMFAIL)));

    // Closed: the session is gone (its XA transaction rolled back with it) ...
    wait_until_session_gone(&mut observer, stuck).await;
    // ... and the next call runs on a new connection.
    let mut ids = Vec::new();
    txretry::mysql_async::transaction(&pool, &RetryPolicy::default(), async |tx| {
        ids.push(connection_id(tx).await);
        tx.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
            .await
    })
    .await
    .expect("a fresh connection commits");
    assert_eq!(ids.len(), 1);
    assert_ne!(ids[0], stuck, "not the session whose BEGIN failed");
    assert_eq!(value(&mut observer, &t, 1).await, 1);

    drop_tables(&mut observer, &[&t]).await;
    drop(observer);
    pool.disconnect().await.unwrap();
}

/// The runner's future is dropped mid-attempt (as `tokio::time::timeout` or a `select!`
/// would drop it), with the attempt's transaction open. Its connection is closed rather
/// than pooled: the server ends that session, nothing the attempt wrote is committed, and
/// the next call on the one-connection pool runs on a different connection. Two moments:
///
/// 1. mid-statement: the closure's `UPDATE` waits for a row lock another session holds
///    (cancelled once the server shows that `UPDATE` running, not after a delay). The
///    session can only end once the lock is released, so the other session then commits.
///    (mysql_async alone already loses such a connection: the cancelled read takes its
///    socket with it.)
/// 2. between statements: the closure has written and awaits something else. Pooled (the
///    behaviour before this change), mysql_async would roll the transaction back and hand
///    the same session to the next caller; the runner closes it instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_attempt_closes_its_connection() {
    let Some(url) = url("mysql_async::a_cancelled_attempt_closes_its_connection") else {
        return;
    };
    let pool = single_connection_pool(&url);
    let mut observer = direct_conn(&url).await;
    let t = table("my_cancelled");
    create_rows(&mut observer, &t, 2).await;
    let policy = RetryPolicy::default();
    let mut cancelled = Vec::new();

    // 1. Mid-statement. Another session holds row 1.
    let mut holder = direct_conn(&url).await;
    let mut held = holder.start_transaction(TxOpts::default()).await.unwrap();
    held.query_drop(format!("UPDATE {t} SET v = v + 1 WHERE id = 1"))
        .await
        .unwrap();
    let blocked = format!("UPDATE {t} SET v = v + 10 WHERE id = 1");
    let (started, mut attempt_id) = watch::channel(None::<u64>);
    let runner = txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        let id = connection_id(tx).await;
        started.send_replace(Some(id));
        tx.query_drop(blocked.as_str()).await
    });
    let waiting = async {
        let id = attempt_id
            .wait_for(Option::is_some)
            .await
            .unwrap()
            .expect("set");
        wait_for_statement(&mut observer, id, &blocked).await;
        id
    };
    // Whichever finishes first, the other is dropped; the runner cannot finish while the
    // row is locked, so this drops the runner mid-statement.
    let id = tokio::select! {
        result = runner => panic!("the attempt finished while the row was locked: {result:?}"),
        id = waiting => id,
    };
    cancelled.push(id);
    held.commit().await.unwrap();
    drop(holder);
    wait_until_session_gone(&mut observer, id).await;

    // 2. Between statements: the closure wrote row 2 and waits for something that never
    // comes.
    let (started, mut attempt_id) = watch::channel(None::<u64>);
    let runner = txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        let id = connection_id(tx).await;
        tx.query_drop(format!("UPDATE {t} SET v = v + 10 WHERE id = 2"))
            .await?;
        started.send_replace(Some(id));
        std::future::pending::<()>().await;
        Ok::<_, mysql_async::Error>(())
    });
    let written = async {
        attempt_id
            .wait_for(Option::is_some)
            .await
            .unwrap()
            .expect("set")
    };
    let id = tokio::select! {
        result = runner => panic!("the attempt cannot finish: {result:?}"),
        id = written => id,
    };
    cancelled.push(id);
    wait_until_session_gone(&mut observer, id).await;

    assert_eq!(
        (
            value(&mut observer, &t, 1).await,
            value(&mut observer, &t, 2).await
        ),
        (1, 0),
        "only the other session's change committed"
    );
    let mut ids = Vec::new();
    txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        ids.push(connection_id(tx).await);
        tx.query_drop(format!("UPDATE {t} SET v = v + 100 WHERE id = 1"))
            .await
    })
    .await
    .expect("the next call commits");
    assert_eq!(ids.len(), 1);
    assert!(
        !cancelled.contains(&ids[0]),
        "not a cancelled attempt's connection: {ids:?} {cancelled:?}"
    );
    assert_eq!(value(&mut observer, &t, 1).await, 101);

    drop_tables(&mut observer, &[&t]).await;
    drop(observer);
    pool.disconnect().await.unwrap();
}
