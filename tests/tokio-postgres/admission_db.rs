//! Admission across processes, on the database (`Admission::in_database`). Two sets of
//! clients stand in for two processes: each has its own policy and its own `Admission`,
//! so only the database can make them take turns. Sessions are told apart by
//! `application_name`, and every wait is observed in `pg_stat_activity` / `pg_locks`,
//! never timed. The scenarios every driver has are in `tests/shared/admission/`; [`Db`]
//! is how they run here. The one here is Postgres's own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::Notify;
use tokio_postgres::{Client, NoTls};
use txretry::{Isolation, KeyHash, RetryPolicy, StopReason, TxError, TxOptions};
use txretry_testkit::intervals::{policy, shared};
use txretry_testkit::wait::{poll_until, within};

use crate::admission::{
    Binary, Driver, Failed, Interval, OnRow, Said, Server, SessionState, Started, Then,
};

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

/// tokio-postgres for the scenarios of `tests/shared/admission/`: a process is a set of
/// clients, one per worker, that carry its name.
pub struct Db;

impl Driver for Db {
    const BINARY: Binary = Binary::new("tokio_postgres", "adm_tp", Server::Postgres);
    /// The URL, the sessions' `application_name` and what they run first.
    type Process = (String, String, Option<&'static str>);
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

    async fn process(
        url: &str,
        app: &str,
        _workers: u32,
        setup: Option<&'static str>,
    ) -> Self::Process {
        (url.to_string(), app.to_string(), setup)
    }

    async fn worker((url, app, setup): &Self::Process) -> Client {
        let client = connect_as(url, app).await;
        if let Some(setup) = setup {
            client.batch_execute(setup).await.unwrap();
        }
        client
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

    async fn close(_: Self::Process) {}

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

    /// The caller keeps its client: the dropped attempt's ROLLBACK, queued behind its wait,
    /// leaves the session idle.
    const AFTER_CANCEL: SessionState = SessionState::Idle;
    const KILLED: StopReason = StopReason::ConnectionUnusable;

    async fn run(
        client: &mut Client,
        policy: &RetryPolicy,
        options: &TxOptions,
        started: Started,
        then: Then,
    ) -> Result<(), Failed> {
        let server = Self::BINARY.server;
        txretry::tokio_postgres::transaction_with(client, policy, options, async move |tx| {
            let me: i64 = tx.query_one(server.session_id(), &[]).await?.get(0);
            // A test that does not look at the ids has dropped the receiver.
            let _ = started.send(me);
            match &then {
                Then::Commit => {}
                Then::WaitFor(release) => release.notified().await,
                Then::SleepInServer => tx.batch_execute(server.sleep_a_minute()).await?,
                Then::Select(query, to) => {
                    let _ = to.send(tx.query_one(query, &[]).await?.get(0));
                }
                // tokio-postgres's error cannot be made by an application: the business
                // error is raised by the server, as a PL/pgSQL function would (P0001).
                Then::Refuse => {
                    tx.batch_execute("DO $$ BEGIN RAISE EXCEPTION 'refund refused'; END $$")
                        .await?
                }
            }
            Ok::<_, tokio_postgres::Error>(())
        })
        .await
        .map_err(|err| {
            Failed::of(err, |err| Said {
                sqlstate: err.code().map(|code| code.code().to_string()),
                number: None,
                message: err
                    .as_db_error()
                    .map_or_else(|| err.to_string(), |db| db.message().to_string()),
            })
        })
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
