//! The commit boundary, through `txretry_testkit::CommitFaultProxy`: armed, the proxy
//! forwards a `COMMIT` to MariaDB (so it lands), throws the server's OK away and answers
//! the client with ERR 2013 ("Lost connection to MySQL server during query"), as a proxy
//! whose server link broke at that moment would. The client cannot know whether the
//! transaction committed: the runner reports it as ambiguous and runs it again only for a
//! call declared idempotent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_async::Pool;
use mysql_async::prelude::*;
use txretry::{Code, KindSet, Phase, RetryPolicy, StopReason, TxOptions, Verdict};
use txretry_testkit::CommitFaultProxy;

use crate::common::*;

/// CR_SERVER_LOST, as the proxy sends it.
const SERVER_LOST: u16 = 2013;

/// A pool whose connections go through `proxy` (its URL says `prefer_socket=false`, so
/// never around it over the server's unix socket; the proxy's counters are asserted too).
fn pool_via(proxy: &CommitFaultProxy) -> Pool {
    Pool::new(proxy.url())
}

/// What each retry event said: the runner's verdict, the phase, the code.
type Events = Arc<Mutex<Vec<(Verdict, Phase, Option<Code>)>>>;

fn policy(retry_on: KindSet) -> (RetryPolicy, Events) {
    let events: Events = Arc::default();
    let sink = Arc::clone(&events);
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .retry_on(retry_on)
        .backoff(txretry::Backoff::Constant(Duration::from_millis(10)))
        .on_retry(move |e| sink.lock().unwrap().push((e.verdict, e.phase, e.code)))
        .build()
        .unwrap();
    (policy, events)
}

/// A plain INSERT (no key, so a second run would store a second row) whose COMMIT lands but
/// is answered with 2013. Even under a policy that retries every transient kind, the runner
/// does not run it again: it returns the 2013 as ambiguous, at COMMIT, after one attempt,
/// and the row is in the table exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_answered_with_2013_is_ambiguous_and_not_rerun() {
    let Some(url) = url("mysql_async::commit_answered_with_2013") else {
        return;
    };
    let mut direct = direct_conn(&url).await;
    let t = table("my_commit_2013");
    direct
        .query_drop(format!(
            "CREATE TABLE {t} (note varchar(40) NOT NULL) ENGINE=InnoDB"
        ))
        .await
        .unwrap();
    let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
    let pool = pool_via(&proxy);

    let (policy, events) = policy(KindSet::ALL);
    proxy.arm_commit_faults(1);
    let mut attempts = 0;
    let err = txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        tx.query_drop(format!("INSERT INTO {t} (note) VALUES ('order 1')"))
            .await
    })
    .await
    .expect_err("the proxy answers the COMMIT with 2013");

    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 1, "COMMIT was sent once");
    assert_eq!(errno(err.error()), Some(SERVER_LOST), "{err:?}");
    assert_eq!(attempts, 1);
    assert!(events.lock().unwrap().is_empty(), "no retry");
    assert!(err.outcome().may_have_committed());
    assert_outcome(
        &err,
        Verdict::Ambiguous,
        Phase::Commit,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), Some(Code::MySql(SERVER_LOST)));
    // It had committed: exactly once.
    assert_eq!(count(&mut direct, &t).await, 1);

    pool.disconnect().await.unwrap();
    drop(proxy);
    drop_tables(&mut direct, &[&t]).await;
}

/// The same fault on an idempotent upsert declared with `TxOptions::idempotent(true)`: the
/// ambiguous commit is retried, on a new connection, and the second attempt commits. The
/// row is there once, with its value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_call_retries_an_ambiguous_commit() {
    let Some(url) = url("mysql_async::idempotent_call_retries_an_ambiguous_commit") else {
        return;
    };
    let mut direct = direct_conn(&url).await;
    let t = table("my_commit_idem");
    direct
        .query_drop(format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, v bigint NOT NULL) ENGINE=InnoDB"
        ))
        .await
        .unwrap();
    let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
    let pool = pool_via(&proxy);

    // The default kinds: an ambiguous verdict is retried because of the call's options,
    // not because the policy retries connection failures.
    let (policy, events) = policy(KindSet::DEFAULT);
    let idempotent = TxOptions::new().idempotent(true);
    proxy.arm_commit_faults(1);
    let mut ids = Vec::new();
    let v = txretry::mysql_async::transaction_with(&pool, &policy, &idempotent, async |tx| {
        ids.push(connection_id(tx).await);
        tx.query_drop(format!(
            "INSERT INTO {t} (id, v) VALUES (1, 42) ON DUPLICATE KEY UPDATE v = VALUES(v)"
        ))
        .await?;
        tx.query_first::<i64, _>(format!("SELECT v FROM {t} WHERE id = 1"))
            .await
    })
    .await
    .expect("the retry commits");

    assert_eq!(v, Some(42));
    assert_eq!(ids.len(), 2, "two attempts");
    assert_ne!(ids[0], ids[1], "the retry ran on a new connection");
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 2);
    assert_eq!(
        *events.lock().unwrap(),
        [(
            Verdict::Ambiguous,
            Phase::Commit,
            Some(Code::MySql(SERVER_LOST))
        )]
    );
    assert_eq!(count(&mut direct, &t).await, 1, "the row once");
    assert_eq!(value(&mut direct, &t, 1).await, 42);

    // Without the declaration the same fault is not retried.
    proxy.arm_commit_faults(1);
    let mut attempts = 0;
    let err = txretry::mysql_async::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        tx.query_drop(format!(
            "INSERT INTO {t} (id, v) VALUES (1, 43) ON DUPLICATE KEY UPDATE v = VALUES(v)"
        ))
        .await
    })
    .await
    .expect_err("not idempotent: returned");
    assert_eq!(attempts, 1);
    assert_outcome(
        &err,
        Verdict::Ambiguous,
        Phase::Commit,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(value(&mut direct, &t, 1).await, 43, "it had committed");

    pool.disconnect().await.unwrap();
    drop(proxy);
    drop_tables(&mut direct, &[&t]).await;
}
