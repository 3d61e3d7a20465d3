//! The commit boundary through txretry-testkit's `CommitFaultProxy`, for sqlx on
//! PostgreSQL and on MySQL (each binary's `dialect` module says how they differ): the
//! runner's COMMIT reaches the server and lands, but the proxy answers it with a
//! connection-class error — what PgBouncer sends when its server link breaks (FATAL 08P01),
//! what a MySQL client reports when the link drops mid-query (2013) — and closes the
//! connection. Nobody can tell from that answer whether the transaction committed: the
//! verdict is ambiguous, and the runner runs the closure again only for a call declared
//! idempotent — on a new connection from the pool.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use txretry::{
    Backoff, KindSet, Phase, RetryPolicy, StopReason, TransientKind, TxError, TxOptions, Verdict,
};
use txretry_testkit::CommitFaultProxy;

use crate::common::{Seen, drop_table, exec, setup, sql, table, within};
use crate::dialect::{
    self, DRIVER, Pool, PoolOptions, SESSION_ID, SessionId, TABLE_OPTIONS, TEXT, insert_once,
    lost_commit_code,
};

/// Five attempts, every kind retried (connection failures included), recording retries
/// and give-ups.
fn retry_everything(seen: &Seen) -> RetryPolicy {
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::Constant(Duration::from_millis(1)))
        .retry_on(KindSet::ALL);
    let seen_retries = seen.clone();
    seen.give_ups(policy)
        .on_retry(move |event| seen_retries.record(event))
        .build()
        .unwrap()
}

/// A pool of one connection through the proxy, and a count of the connections the runner
/// handed back to it. sqlx pings a returned connection and closes it if that fails, so the
/// count (sqlx's `after_release` runs only for a connection handed back, not for one the
/// runner discarded) is what tells the runner's own decision apart.
async fn pool_via(proxy: &CommitFaultProxy) -> (Pool, Arc<AtomicUsize>) {
    let released = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&released);
    let pool = PoolOptions::new()
        .max_connections(1)
        .test_before_acquire(false)
        .after_release(move |_, _| {
            count.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(true) })
        })
        .connect(proxy.url())
        .await
        .unwrap();
    (pool, released)
}

/// How many connections have been handed back to the pool so far. Holds the pool's one
/// connection while it reads: returning a connection runs in the background, and the
/// acquire waits for it. Handing this one back counts too, in the next reading.
async fn released_so_far(pool: &Pool, released: &AtomicUsize) -> usize {
    let conn = pool.acquire().await.unwrap();
    let n = released.load(Ordering::SeqCst);
    drop(conn);
    n
}

async fn rows(pool: &Pool, t: &str) -> i64 {
    sqlx::query_scalar(sql(format!("SELECT count(*) FROM {t}")))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// What the proxy's fault looks like to the runner's caller: the proxy's error, unchanged,
/// judged ambiguous at COMMIT on the first attempt.
#[track_caller]
fn assert_ambiguous_commit(err: &TxError<sqlx::Error>) {
    dialect::assert_lost_commit_error(err.error());
    // On its own, the proxy's error is a connection failure…
    assert_eq!(
        txretry::classify(err.error()).verdict,
        Verdict::Transient(TransientKind::Connection)
    );
    // …but at COMMIT it means "may have committed".
    let outcome = err.outcome();
    assert!(outcome.may_have_committed(), "{outcome:?}");
    assert_eq!(outcome.verdict(), Verdict::Ambiguous);
    assert_eq!(outcome.code(), lost_commit_code());
    assert_eq!(outcome.phase(), Phase::Commit);
    assert_eq!(outcome.attempts(), 1);
    assert_eq!(outcome.history().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_answered_with_a_connection_error_is_ambiguous_and_not_rerun() {
    let Some((url, direct)) = setup(&format!("{DRIVER} commit fault"), 2).await else {
        return;
    };
    let t = table("commit_fault");
    // No key: a second run would show as a second row, not as a duplicate-key error.
    exec(
        &direct,
        format!("CREATE TABLE {t} (note {TEXT} NOT NULL){TABLE_OPTIONS}"),
    )
    .await;
    let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
    let (pool, released) = pool_via(&proxy).await;

    let seen = Seen::default();
    let policy = retry_everything(&seen);
    let before = released_so_far(&pool, &released).await;
    proxy.arm_commit_faults(1);
    let mut attempts = 0;
    let err = within(txretry::sqlx::transaction(&pool, &policy, async |tx| {
        attempts += 1;
        sqlx::query(sql(format!("INSERT INTO {t} VALUES ('order 17')")))
            .execute(&mut **tx)
            .await
            .map(drop)
    }))
    .await
    .expect_err("the proxy answers the COMMIT with a connection error");

    assert_ambiguous_commit(&err);
    assert_eq!(
        err.outcome().stop_reason(),
        StopReason::NotRetryable,
        "ambiguous, and the call is not idempotent: {err:?}"
    );
    assert_eq!(attempts, 1, "an ambiguous COMMIT is not run again");
    assert!(seen.all().is_empty(), "no retry was scheduled");
    assert_eq!(
        seen.gave_up(),
        [err.outcome().clone()],
        "the give-up hook saw the ambiguous outcome once"
    );
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 1, "one COMMIT went through the proxy");
    // Read over a direct connection: the COMMIT landed, exactly once.
    assert_eq!(rows(&direct, &t).await, 1);

    // The broken connection was closed, not handed back to the pool…
    assert_eq!(
        released_so_far(&pool, &released).await,
        before + 1,
        "only the reading's own connection: the runner discarded the one the COMMIT failed on"
    );
    // …and the next call works, on a new one.
    txretry::sqlx::transaction(&pool, &RetryPolicy::disabled(), async |tx| {
        sqlx::query(sql(format!("INSERT INTO {t} VALUES ('order 18')")))
            .execute(&mut **tx)
            .await
            .map(drop)
    })
    .await
    .expect("a fresh connection from the pool");
    assert_eq!(rows(&direct, &t).await, 2);
    drop_table(&direct, &t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_call_retries_an_ambiguous_commit() {
    let Some((url, direct)) = setup(&format!("{DRIVER} commit fault idempotent"), 2).await else {
        return;
    };
    let t = table("commit_fault_idem");
    exec(
        &direct,
        format!("CREATE TABLE {t} (id int PRIMARY KEY, note {TEXT} NOT NULL){TABLE_OPTIONS}"),
    )
    .await;
    let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
    let (pool, released) = pool_via(&proxy).await;

    let seen = Seen::default();
    let policy = retry_everything(&seen);
    let options = TxOptions::new().idempotent(true);
    let before = released_so_far(&pool, &released).await;
    proxy.arm_commit_faults(1);
    let mut sessions = Vec::new();
    let inserted = within(txretry::sqlx::transaction_with(
        &pool,
        &policy,
        &options,
        async |tx| {
            let session: SessionId = sqlx::query_scalar(SESSION_ID).fetch_one(&mut **tx).await?;
            sessions.push(session);
            // Idempotent: keyed by a fixed id, a second run changes nothing.
            let done = sqlx::query(sql(insert_once(&t, "18, 'order 18'")))
                .execute(&mut **tx)
                .await?;
            Ok::<_, sqlx::Error>(done.rows_affected())
        },
    ))
    .await
    .expect("the idempotent call is retried and commits");

    assert_eq!(sessions.len(), 2, "two attempts: {sessions:?}");
    assert_ne!(
        sessions[0], sessions[1],
        "the second attempt ran on a new connection: the broken one was discarded"
    );
    assert_eq!(
        inserted, 0,
        "the first COMMIT had landed; the retry found the row"
    );
    assert_eq!(
        released_so_far(&pool, &released).await,
        before + 2,
        "the reading's own and the second attempt's: the first attempt's was discarded"
    );
    // The runner retried the ambiguous COMMIT once, because the call is idempotent.
    let judged = seen.judged();
    assert_eq!(judged.len(), 1, "{judged:?}");
    assert_eq!(judged[0].verdict, Verdict::Ambiguous);
    assert_eq!(judged[0].code, lost_commit_code());
    assert_eq!(judged[0].phase, Phase::Commit);
    assert!(seen.gave_up().is_empty());
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 2);
    let notes: Vec<(i32, String)> = sqlx::query_as(sql(format!("SELECT id, note FROM {t}")))
        .fetch_all(&direct)
        .await
        .unwrap();
    assert_eq!(notes, [(18, "order 18".to_owned())], "the row exists once");
    drop_table(&direct, &t).await;
}
