//! Admission across processes, on the database (`Admission::in_database`). Two sets of
//! clients stand in for two processes: each has its own policy and its own `Admission`,
//! so only the database can make them take turns. Sessions are told apart by
//! `application_name`, and every wait is observed in `pg_stat_activity` / `pg_locks`,
//! never timed. The scenarios every driver has are in `tests/shared/admission.rs`; [`Db`]
//! is how they run here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};
use tokio_postgres::{Client, NoTls};
use txretry::{
    Admission, Code, Isolation, KeyHash, Phase, RetryPolicy, SqlState, StopReason, TransientKind,
    TxError, TxOptions, Verdict,
};
use txretry_testkit::intervals::{policy, shared};
use txretry_testkit::wait::{poll_until, within};

use crate::admission::{Binary, Driver, Interval, OnRow, Server};

fn url(test: &str) -> Option<String> {
    txretry_testkit::postgres_url(test)
}

/// A new session named `app` (its `application_name`); its connection runs on the runtime.
async fn connect_as(url: &str, app: &str) -> Client {
    let mut config: tokio_postgres::Config = url.parse().unwrap();
    config.application_name(app);
    let (client, connection) = config.connect(NoTls).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// Polls `query` (a boolean, with `$1 = app`) until it is true; panics after about 30 s.
async fn poll(observer: &Client, what: &str, query: &str, app: &str) {
    poll_until(format!("{what} never happened"), async || {
        observer.query_one(query, &[&app]).await.unwrap().get(0)
    })
    .await;
}

/// Waits until the session named `app` waits for an advisory lock.
async fn wait_for_advisory_wait(observer: &Client, app: &str) {
    poll(
        observer,
        &format!("{app} waiting for an advisory lock"),
        "SELECT count(*) > 0 FROM pg_stat_activity
         WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
        app,
    )
    .await;
}

/// How many sessions hold or wait for the advisory lock of `key` (as
/// `pg_advisory_xact_lock(bigint)` names it: high and low 32 bits in `classid`, `objid`).
async fn advisory_holders(observer: &Client, key: i64) -> i64 {
    observer
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1
             AND ((classid::bigint << 32) | objid::bigint) = $1",
            &[&key],
        )
        .await
        .unwrap()
        .get(0)
}

/// The key a test's transactions contend on, and its advisory lock number.
fn key(name: &str, n: i64) -> ((String, i64), i64) {
    let key = (name.to_string(), n);
    let id = KeyHash::of(&key).to_i64();
    (key, id)
}

/// tokio-postgres for the scenarios of `tests/shared/admission.rs`: a process is a set of
/// tokio-postgres for the scenarios of `tests/shared/admission.rs`: a process is a set of
/// clients, one per worker, that carry its name.
pub struct Db;

impl Driver for Db {
    const BINARY: Binary = Binary::new("tokio_postgres", "adm_tp", Server::Postgres);
    /// The URL and the sessions' `application_name`.
    type Process = (String, String);
    type Worker = Client;

    async fn exec(url: &str, sql: String) {
        connect_as(url, "setup")
            .await
            .batch_execute(&sql)
            .await
            .unwrap();
    }

    async fn query_i64(url: &str, sql: String) -> i64 {
        let observer = connect_as(url, "observer").await;
        observer.query_one(&sql, &[]).await.unwrap().get(0)
    }

    async fn process(url: &str, app: &str, _workers: u32) -> (String, String) {
        (url.to_string(), app.to_string())
    }

    async fn worker((url, app): &(String, String)) -> Client {
        connect_as(url, app).await
    }

    async fn record(client: &mut Client, policy: &RetryPolicy, options: &TxOptions, i: Interval) {
        let (insert, update) = (i.insert(), i.update());
        txretry::tokio_postgres::transaction_with(client, policy, options, async move |tx| {
            let id: i64 = tx.query_one(&insert, &[&i.k, &i.process]).await?.get(0);
            i.meet.meet().await;
            tx.batch_execute(i.sleep()).await?;
            tx.execute(&update, &[&id]).await?;
            Ok::<_, tokio_postgres::Error>(())
        })
        .await
        .unwrap();
    }

    async fn close(_: (String, String)) {}

    /// Under REPEATABLE READ; counts the advisory locks its session holds (the
    /// runner takes them right after BEGIN, before the closure). With `collide`,
    /// the first attempt first reads the row (taking the snapshot) and has another session
    /// update it, so the attempt's own UPDATE fails with 40001 (a serialization failure).
    async fn held_per_attempt(
        client: &mut Client,
        policy: &RetryPolicy,
        row: OnRow<'_>,
    ) -> Vec<i64> {
        let mut held = Vec::new();
        let update = row.update();
        let options = TxOptions::new()
            .isolation(Isolation::RepeatableRead)
            .contends_on(row.key());
        txretry::tokio_postgres::transaction_with(client, policy, &options, async |tx| {
            let n: i64 = tx
                .query_one(
                    "SELECT count(*) FROM pg_locks
                     WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted",
                    &[],
                )
                .await?
                .get(0);
            held.push(n);
            if row.collide && held.len() == 1 {
                tx.batch_execute(&row.select()).await?;
                connect_as(row.url, &format!("{}_other", row.table))
                    .await
                    .batch_execute(&update)
                    .await
                    .unwrap();
            }
            tx.batch_execute(&update).await?;
            Ok::<_, tokio_postgres::Error>(())
        })
        .await
        .unwrap();
        held
    }

    async fn key_holders(url: &str, key: &(String, i64)) -> i64 {
        advisory_holders(
            &connect_as(url, "observer").await,
            KeyHash::of(key).to_i64(),
        )
        .await
    }
}

type Held = tokio::task::JoinHandle<Result<(), TxError<tokio_postgres::Error>>>;

/// A transaction on `client` that holds `options`' key until `release` is notified;
/// `holding` is notified once it runs (inside the transaction, after its locks).
fn hold(
    mut client: Client,
    options: TxOptions,
    holding: Arc<Notify>,
    release: Arc<Notify>,
) -> Held {
    tokio::spawn(async move {
        txretry::tokio_postgres::transaction_with(
            &mut client,
            &policy(shared(), 1),
            &options,
            async move |tx| {
                tx.batch_execute("SELECT 1").await?;
                holding.notify_one();
                release.notified().await;
                Ok::<_, tokio_postgres::Error>(())
            },
        )
        .await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_session_releases_its_key() {
    let Some(url) = url("tokio_postgres::admission_db killed") else {
        return;
    };
    let name = txretry_testkit::unique_name("adm_tp_killed");
    let (key, id) = key(&name, 1);
    let options = TxOptions::new().contends_on(key);
    let (a, b) = (format!("{name}_a"), format!("{name}_b"));
    let observer = connect_as(&url, "observer").await;

    // Process A holds the key and sleeps in the server until its session is killed.
    let mut client_a = connect_as(&url, &a).await;
    let (pid_tx, pid) = oneshot::channel();
    let holder = tokio::spawn({
        let options = options.clone();
        async move {
            let mut pid_tx = Some(pid_tx);
            txretry::tokio_postgres::transaction_with(
                &mut client_a,
                &policy(shared(), 1),
                &options,
                async move |tx| {
                    let me: i32 = tx.query_one("SELECT pg_backend_pid()", &[]).await?.get(0);
                    if let Some(pid_tx) = pid_tx.take() {
                        pid_tx.send(me).unwrap();
                    }
                    tx.batch_execute("SELECT pg_sleep(60)").await?;
                    Ok::<_, tokio_postgres::Error>(())
                },
            )
            .await
        }
    });
    let holder_pid = within(pid).await.unwrap();
    assert_eq!(advisory_holders(&observer, id).await, 1);

    // Process B waits for it on the server.
    let mut client_b = connect_as(&url, &b).await;
    let ran = Arc::new(AtomicU32::new(0));
    let counter = ran.clone();
    let waiter = tokio::spawn({
        let options = options.clone();
        async move {
            txretry::tokio_postgres::transaction_with(
                &mut client_b,
                &policy(shared(), 1),
                &options,
                async move |tx| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    tx.batch_execute("SELECT 1").await
                },
            )
            .await
        }
    });
    wait_for_advisory_wait(&observer, &b).await;
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "B waits while A holds the key"
    );

    let killed: bool = observer
        .query_one("SELECT pg_terminate_backend($1)", &[&holder_pid])
        .await
        .unwrap()
        .get(0);
    assert!(killed);
    within(waiter)
        .await
        .unwrap()
        .expect("B gets the key once A's session is gone");
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let err = within(holder)
        .await
        .unwrap()
        .expect_err("A's session was killed");
    assert_eq!(
        err.outcome().stop_reason(),
        StopReason::ConnectionUnusable,
        "{err:?}"
    );
    assert_eq!(advisory_holders(&observer, id).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_waiter_releases_everything() {
    let Some(url) = url("tokio_postgres::admission_db cancelled") else {
        return;
    };
    let name = txretry_testkit::unique_name("adm_tp_cancel");
    let (key, id) = key(&name, 1);
    let options = TxOptions::new().contends_on(key);
    let (a, b) = (format!("{name}_a"), format!("{name}_b"));
    let observer = connect_as(&url, "observer").await;

    let (holding, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let holder = hold(
        connect_as(&url, &a).await,
        options.clone(),
        holding.clone(),
        release.clone(),
    );
    within(holding.notified()).await;

    // B's attempt is dropped while the server has it waiting for the key; B keeps its
    // client, as a caller whose call timed out would.
    let mut client_b = connect_as(&url, &b).await;
    let (cancel_tx, cancel) = oneshot::channel::<()>();
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let policy_b = policy(shared(), 1);
    let waiter = tokio::spawn({
        let (options, policy_b) = (options.clone(), policy_b.clone());
        async move {
            let run = txretry::tokio_postgres::transaction_with(
                &mut client_b,
                &policy_b,
                &options,
                async move |_tx| {
                    flag.store(true, Ordering::SeqCst);
                    Ok::<_, tokio_postgres::Error>(())
                },
            );
            tokio::select! {
                _ = run => panic!("B cannot finish while A holds the key"),
                _ = cancel => {}
            }
            client_b
        }
    });
    wait_for_advisory_wait(&observer, &b).await;
    cancel_tx.send(()).unwrap();
    let client_b = within(waiter).await.unwrap();

    release.notify_one();
    within(holder).await.unwrap().unwrap();
    // The dropped attempt's ROLLBACK was queued behind its wait; once the server has
    // answered both, B's session is idle and holds nothing.
    let b_in_tx: bool = within(client_b.query_one(
        "SELECT count(*) > 0 FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'",
        &[],
    ))
    .await
    .unwrap()
    .get(0);
    assert!(!b_in_tx, "B's session holds no advisory lock");
    poll(
        &observer,
        "B's session idle",
        "SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = $1 AND state = 'idle'",
        &b,
    )
    .await;
    assert!(
        !ran.load(Ordering::SeqCst),
        "the cancelled attempt never ran"
    );
    assert_eq!(
        advisory_holders(&observer, id).await,
        0,
        "nobody holds the key"
    );
    let free: bool = observer
        .query_one("SELECT pg_try_advisory_lock($1)", &[&id])
        .await
        .unwrap()
        .get(0);
    assert!(free, "the key can be taken at once");
    observer
        .query_one("SELECT pg_advisory_unlock($1)", &[&id])
        .await
        .unwrap();
    // And B's client runs a transaction on it again.
    let mut client_b = client_b;
    within(txretry::tokio_postgres::transaction_with(
        &mut client_b,
        &policy_b,
        &options,
        async |tx| tx.batch_execute("SELECT 1").await,
    ))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_not_granted_in_time_is_a_lock_timeout() {
    let Some(url) = url("tokio_postgres::admission_db lock timeout") else {
        return;
    };
    let name = txretry_testkit::unique_name("adm_tp_timeout");
    let (key, id) = key(&name, 1);
    let options = TxOptions::new().contends_on(key);
    let (a, b) = (format!("{name}_a"), format!("{name}_b"));
    let observer = connect_as(&url, "observer").await;

    let (holding, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let holder = hold(
        connect_as(&url, &a).await,
        options.clone(),
        holding.clone(),
        release.clone(),
    );
    within(holding.notified()).await;

    // B's session sets its own lock_timeout, which its transactions must keep.
    let mut client_b = connect_as(&url, &b).await;
    client_b
        .batch_execute("SET lock_timeout = '7s'")
        .await
        .unwrap();
    let impatient = policy(
        Admission::per_key().in_database(Duration::from_millis(200)),
        2,
    );
    let ran = Arc::new(AtomicU32::new(0));
    let counter = ran.clone();
    let err = within(txretry::tokio_postgres::transaction_with(
        &mut client_b,
        &impatient,
        &options,
        async move |_tx| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, tokio_postgres::Error>(())
        },
    ))
    .await
    .expect_err("A holds the key throughout");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    let outcome = err.outcome();
    assert_eq!(
        outcome.verdict(),
        Verdict::Transient(TransientKind::LockTimeout),
        "{err:?}"
    );
    assert_eq!(
        outcome.code(),
        Some(Code::SqlState(SqlState::new("55P03").unwrap()))
    );
    assert_eq!(outcome.phase(), Phase::Body);
    assert_eq!(outcome.attempts(), 2, "retried under the policy");
    assert_eq!(outcome.stop_reason(), StopReason::AttemptsExhausted);
    assert_eq!(
        err.error().code(),
        Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
    );

    // B's session is out of the failed transaction, holds nothing, and kept its setting.
    let row = client_b
        .query_one(
            "SELECT current_setting('lock_timeout'),
                    (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "7s");
    assert_eq!(row.get::<_, i64>(1), 0);
    assert_eq!(advisory_holders(&observer, id).await, 1, "only A's");

    release.notify_one();
    within(holder).await.unwrap().unwrap();
    // Uncontended now; the transaction runs with the session's own lock_timeout.
    let setting: String = within(txretry::tokio_postgres::transaction_with(
        &mut client_b,
        &impatient,
        &options,
        async |tx| {
            let row = tx
                .query_one("SELECT current_setting('lock_timeout')", &[])
                .await?;
            Ok::<_, tokio_postgres::Error>(row.get(0))
        },
    ))
    .await
    .unwrap();
    assert_eq!(setting, "7s");
    assert_eq!(advisory_holders(&observer, id).await, 0);
}

/// A key nobody holds is tried in one statement and held for the whole transaction; a key
/// another session holds is then waited for in the same attempt (a policy of one attempt
/// still commits); and for the next second the process waits for that key at once,
/// without trying it first. Which way the locks were taken shows inside the transaction:
/// only the wait saves the session's `lock_timeout` in `txretry.lock_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_held_elsewhere_is_waited_for_in_the_same_attempt() {
    let Some(url) = url("tokio_postgres::admission_db try first") else {
        return;
    };
    let name = txretry_testkit::unique_name("adm_tp_try");
    let (key, id) = key(&name, 1);
    let options = TxOptions::new().contends_on(key);
    let (a, b) = (format!("{name}_a"), format!("{name}_b"));
    let observer = connect_as(&url, "observer").await;
    let mut client_b = connect_as(&url, &b).await;
    // One attempt: a failed try that surfaced, or a retry, would fail the test.
    let once = policy(shared(), 1);
    let how_locked = async |client: &mut Client| {
        within(txretry::tokio_postgres::transaction_with(
            client,
            &once,
            &options,
            async |tx| {
                let row = tx
                    .query_one(
                        "SELECT (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid()
                                 AND locktype = 'advisory' AND granted),
                                current_setting('txretry.lock_timeout', true)",
                        &[],
                    )
                    .await?;
                Ok::<_, tokio_postgres::Error>((
                    row.get::<_, i64>(0),
                    row.get::<_, Option<String>>(1),
                ))
            },
        ))
        .await
        .unwrap()
    };

    // Free: tried and taken, for the whole transaction; no wait.
    assert_eq!(how_locked(&mut client_b).await, (1, None));

    // Held by A: tried, found held, waited for in the same attempt.
    let (holding, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let holder = hold(
        connect_as(&url, &a).await,
        options.clone(),
        holding.clone(),
        release.clone(),
    );
    within(holding.notified()).await;
    let ran = Arc::new(AtomicU32::new(0));
    let counter = ran.clone();
    let waiter = tokio::spawn({
        let (once, options) = (once.clone(), options.clone());
        async move {
            txretry::tokio_postgres::transaction_with(
                &mut client_b,
                &once,
                &options,
                async move |_tx| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, tokio_postgres::Error>(())
                },
            )
            .await
            .map(|()| client_b)
        }
    });
    wait_for_advisory_wait(&observer, &b).await;
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    release.notify_one();
    within(holder).await.unwrap().unwrap();
    let mut client_b = within(waiter).await.unwrap().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 1);

    // Busy within the last second: waited for at once, though free now.
    let (held, saved) = how_locked(&mut client_b).await;
    assert_eq!(held, 1);
    assert!(saved.is_some(), "the wait saves lock_timeout");
    assert_eq!(advisory_holders(&observer, id).await, 0);
}
