//! The commit boundary through txretry-testkit's `CommitFaultProxy`, for SeaORM on
//! PostgreSQL and on MySQL (each binary's `dialect` module says how they differ): the
//! runner's COMMIT reaches the server and lands, but the proxy answers it with a
//! connection-class error (PgBouncer's FATAL 08P01; a MySQL client's 2013) and closes the
//! connection. Nobody can tell from that answer whether the transaction committed: the
//! verdict is ambiguous, and the runner runs the closure again only for a call declared
//! idempotent.
//!
//! SeaORM gives the runner no connection of its own to close: these tests also show that
//! the broken connection does not come back from SeaORM's pool of one (sqlx pings a
//! connection handed back and closes it when that fails; `test_before_acquire` is off, so
//! nothing else would catch it).

use std::time::Duration;

use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbErr};
use txretry::{
    Backoff, KindSet, Phase, RetryPolicy, StopReason, TransientKind, TxError, TxOptions, Verdict,
};
use txretry_testkit::CommitFaultProxy;
use txretry_testkit::outcome::assert_outcome;

use crate::common::{Seen, column, drop_table, exec, scalar, setup, table, within};
use crate::dialect::{
    self, DRIVER, SESSION_ID, SessionId, TABLE_OPTIONS, TEXT, insert_once, lost_commit_code,
};

/// Five attempts, every kind retried (connection failures included), recording retries
/// and give-ups.
fn retry_everything(seen: &Seen) -> RetryPolicy {
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::Constant(Duration::from_millis(1)))
        .retry_on(KindSet::ALL);
    seen.give_ups(seen.retries(policy)).build().unwrap()
}

/// SeaORM over a pool of one connection through the proxy, never tested on acquire.
async fn via(proxy: &CommitFaultProxy) -> DatabaseConnection {
    let mut options = ConnectOptions::new(proxy.url());
    options
        .max_connections(1)
        .test_before_acquire(false)
        .sqlx_logging(false);
    Database::connect(options).await.unwrap()
}

/// What the proxy's fault looks like to the runner's caller: the proxy's error, unchanged,
/// judged ambiguous at COMMIT on the first attempt, and not retried (not idempotent).
#[track_caller]
fn assert_ambiguous_commit(err: &TxError<DbErr>) {
    dialect::assert_lost_commit_error(err.error());
    // On its own, the proxy's error is a connection failure…
    assert_eq!(
        txretry::classify(err.error()).verdict,
        Verdict::Transient(TransientKind::Connection)
    );
    // …but at COMMIT it means "may have committed".
    assert_outcome(
        err,
        Verdict::Ambiguous,
        Phase::Commit,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), lost_commit_code());
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
    let db = via(&proxy).await;

    let seen = Seen::default();
    let policy = retry_everything(&seen);
    proxy.arm_commit_faults(1);
    let mut attempts = 0;
    let err = within(txretry::sea_orm::transaction(&db, &policy, async |tx| {
        attempts += 1;
        tx.execute_unprepared(&format!("INSERT INTO {t} VALUES ('order 17')"))
            .await
            .map(drop)
    }))
    .await
    .expect_err("the proxy answers the COMMIT with a connection error");

    assert_ambiguous_commit(&err);
    assert_eq!(attempts, 1, "an ambiguous COMMIT is not run again");
    assert!(seen.all().is_empty(), "no retry was scheduled");
    assert_eq!(seen.gave_up(), [err.outcome().clone()]);
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 1, "one COMMIT went through the proxy");
    // Read over a direct connection: the COMMIT landed, exactly once.
    let rows: i64 = scalar(&direct, format!("SELECT count(*) FROM {t}")).await;
    assert_eq!(rows, 1);

    // The next call works: the pool's one connection is a new one.
    txretry::sea_orm::transaction(&db, &RetryPolicy::disabled(), async |tx| {
        tx.execute_unprepared(&format!("INSERT INTO {t} VALUES ('order 18')"))
            .await
            .map(drop)
    })
    .await
    .expect("a fresh connection from SeaORM's pool");
    let rows: i64 = scalar(&direct, format!("SELECT count(*) FROM {t}")).await;
    assert_eq!(rows, 2);
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
    let db = via(&proxy).await;

    let seen = Seen::default();
    let policy = retry_everything(&seen);
    let options = TxOptions::new().idempotent(true);
    proxy.arm_commit_faults(1);
    let mut sessions = Vec::new();
    let inserted = within(txretry::sea_orm::transaction_with(
        &db,
        &policy,
        &options,
        async |tx| {
            let session: SessionId = scalar(tx, SESSION_ID.to_owned()).await;
            sessions.push(session);
            // Idempotent: keyed by a fixed id, a second run changes nothing.
            let done = tx
                .execute_unprepared(&insert_once(&t, "18, 'order 18'"))
                .await?;
            Ok::<_, DbErr>(done.rows_affected())
        },
    ))
    .await
    .expect("the idempotent call is retried and commits");

    assert_eq!(sessions.len(), 2, "two attempts: {sessions:?}");
    assert_ne!(
        sessions[0], sessions[1],
        "the second attempt ran on a new connection"
    );
    assert_eq!(
        inserted, 0,
        "the first COMMIT had landed; the retry found the row"
    );
    let judged = seen.judged();
    assert_eq!(judged.len(), 1, "{judged:?}");
    assert_eq!(judged[0].verdict, Verdict::Ambiguous);
    assert_eq!(judged[0].code, lost_commit_code());
    assert_eq!(judged[0].phase, Phase::Commit);
    assert!(seen.gave_up().is_empty());
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 2);
    let notes: Vec<i32> = column(&direct, format!("SELECT id FROM {t}")).await;
    assert_eq!(notes, [18], "the row exists once");
    drop_table(&direct, &t).await;
}
