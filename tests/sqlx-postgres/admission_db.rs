//! Admission across processes, on the database (`Admission::in_database`). Two pools stand
//! in for two processes: each has its own policy and its own `Admission`, so only the
//! database can make them take turns. Sessions are told apart by `application_name`, and
//! every wait is observed in `pg_stat_activity` / `pg_locks`, never timed. The scenarios
//! every driver has are in `tests/shared/admission/`; [`Db`] is how they run here. The
//! ones here are Postgres's own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Executor, PgConnection};
use tokio::sync::Notify;
use txretry::{Backoff, Isolation, KeyHash, RetryPolicy, TxOptions};
use txretry_testkit::intervals::{policy, shared};
use txretry_testkit::wait::{poll_until, within};

use crate::admission::{Binary, Driver, Failed, Interval, OnRow, Server, Started, Then};
use crate::common::{connect, exec, sql};

fn url(test: &str) -> Option<String> {
    txretry_testkit::postgres_url(test)
}

/// A pool standing in for one process; its sessions carry `app` as `application_name`,
/// and run `setup` first, if any.
async fn process(
    url: &str,
    app: &str,
    max_connections: u32,
    setup: Option<&'static str>,
) -> PgPool {
    let options: PgConnectOptions = url.parse().unwrap();
    PgPoolOptions::new()
        .max_connections(max_connections)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                if let Some(setup) = setup {
                    conn.execute(setup).await?;
                }
                Ok(())
            })
        })
        .connect_with(options.application_name(app))
        .await
        .unwrap()
}

/// Polls `query` (a boolean, with `$1 = app`) until it is true; panics after about 30 s.
async fn poll(observer: &mut PgConnection, what: &str, query: &'static str, app: &str) {
    poll_until(format!("{what} never happened"), async || {
        sqlx::query_scalar(query)
            .bind(app)
            .fetch_one(&mut *observer)
            .await
            .unwrap()
    })
    .await;
}

/// Waits until a session of `app` waits for an advisory lock.
async fn wait_for_advisory_wait(observer: &mut PgConnection, app: &str) {
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
/// `pg_advisory_lock(bigint)` names it: high and low 32 bits in `classid` and `objid`).
async fn advisory_holders(observer: &mut PgConnection, key: i64) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1
         AND ((classid::bigint << 32) | objid::bigint) = $1",
    )
    .bind(key)
    .fetch_one(observer)
    .await
    .unwrap()
}

/// The key a test's transactions contend on, and its advisory lock number.
fn key(table: &str, n: i64) -> ((String, i64), i64) {
    let key = (table.to_string(), n);
    let id = KeyHash::of(&key).to_i64();
    (key, id)
}

/// sqlx on PostgreSQL for the scenarios of `tests/shared/admission/`.
pub struct Db;

impl Driver for Db {
    const BINARY: Binary = Binary::new("sqlx-postgres", "adm_pg", Server::Postgres);
    type Process = PgPool;
    type Worker = PgPool;

    async fn exec(url: &str, text: String) {
        exec(&mut connect(url).await, text).await;
    }

    async fn query_i64(url: &str, text: String) -> i64 {
        sqlx::query_scalar(sql(text))
            .fetch_one(&mut connect(url).await)
            .await
            .unwrap()
    }

    async fn process(url: &str, app: &str, workers: u32, setup: Option<&'static str>) -> PgPool {
        process(url, app, workers, setup).await
    }

    async fn worker(pool: &PgPool) -> PgPool {
        pool.clone()
    }

    async fn record(pool: &mut PgPool, policy: &RetryPolicy, options: &TxOptions, i: Interval) {
        txretry::sqlx::transaction_with(&*pool, policy, options, async move |tx| {
            let id: i64 = sqlx::query_scalar(sql(i.insert()))
                .bind(i.k)
                .bind(i.process)
                .fetch_one(&mut **tx)
                .await?;
            i.meet.meet().await;
            sqlx::query(i.sleep()).execute(&mut **tx).await?;
            sqlx::query(sql(i.update()))
                .bind(id)
                .execute(&mut **tx)
                .await?;
            Ok::<_, sqlx::Error>(())
        })
        .await
        .unwrap();
    }

    async fn close(pool: PgPool) {
        pool.close().await;
    }

    /// Under REPEATABLE READ; counts the advisory locks its session holds. With `collide`,
    /// the first attempt first reads the row (taking the snapshot) and has another session
    /// update it, so the attempt's own UPDATE fails with 40001 (a serialization failure).
    async fn held_per_attempt(pool: &mut PgPool, policy: &RetryPolicy, row: OnRow<'_>) -> Vec<i64> {
        let mut held = Vec::new();
        let update = row.update();
        let options = TxOptions::new()
            .isolation(Isolation::RepeatableRead)
            .contends_on(row.key());
        txretry::sqlx::transaction_with(&*pool, policy, &options, async |tx| {
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_locks
                 WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted",
            )
            .fetch_one(&mut **tx)
            .await?;
            held.push(n);
            if row.collide && held.len() == 1 {
                sqlx::query(sql(row.select())).execute(&mut **tx).await?;
                exec(&mut connect(row.url).await, update.clone()).await;
            }
            sqlx::query(sql(update.clone())).execute(&mut **tx).await?;
            Ok::<_, sqlx::Error>(())
        })
        .await
        .unwrap();
        held
    }

    async fn key_holders(url: &str, key: &(String, i64)) -> i64 {
        advisory_holders(&mut connect(url).await, KeyHash::of(key).to_i64()).await
    }

    async fn run(
        pool: &mut PgPool,
        policy: &RetryPolicy,
        options: &TxOptions,
        started: Started,
        then: Then,
    ) -> Result<(), Failed> {
        crate::admission_run::run(pool, policy, options, started, then).await
    }
}

async fn drop_table(url: &str, table: &str) {
    exec(
        &mut connect(url).await,
        format!("DROP TABLE IF EXISTS {table}"),
    )
    .await;
}

/// A transaction that holds `key` until `release` is notified; `holding` is notified once
/// it runs (inside the transaction, after its locks). Returns the runner's result.
fn hold(
    pool: &PgPool,
    policy: &RetryPolicy,
    options: &TxOptions,
    holding: Arc<Notify>,
    release: Arc<Notify>,
) -> tokio::task::JoinHandle<Result<(), txretry::TxError<sqlx::Error>>> {
    let run = txretry::sqlx::transaction_with(pool, policy, options, async move |tx| {
        sqlx::query("SELECT 1").execute(&mut **tx).await?;
        holding.notify_one();
        release.notified().await;
        Ok::<_, sqlx::Error>(())
    });
    tokio::spawn(run)
}

/// The wait happens before the transaction's snapshot: under REPEATABLE READ, the
/// attempt that waited for the key sees what the holder committed and succeeds at once,
/// instead of failing with a serialization failure and retrying.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeatable_read_sees_what_the_previous_holder_committed() {
    let Some(url) = url("sqlx-postgres admission_db repeatable read") else {
        return;
    };
    let table = txretry_testkit::unique_name("adm_pg_rr");
    exec(
        &mut connect(&url).await,
        format!("CREATE TABLE {table} (id int PRIMARY KEY, v int NOT NULL); INSERT INTO {table} VALUES (1, 0)"),
    )
    .await;
    let (key, _) = key(&table, 1);
    let options = TxOptions::new()
        .isolation(Isolation::RepeatableRead)
        .contends_on(key);
    let (a, b) = (format!("{table}_a"), format!("{table}_b"));
    let (pool_a, pool_b) = (
        process(&url, &a, 1, None).await,
        process(&url, &b, 1, None).await,
    );
    let mut observer = connect(&url).await;

    let (holding, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let update = format!("UPDATE {table} SET v = v + 1 WHERE id = 1");
    let holder = tokio::spawn({
        let (holding, release, update) = (holding.clone(), release.clone(), update.clone());
        txretry::sqlx::transaction_with(&pool_a, &policy(shared(), 1), &options, async move |tx| {
            sqlx::query(sql(update.clone())).execute(&mut **tx).await?;
            holding.notify_one();
            release.notified().await;
            Ok::<_, sqlx::Error>(())
        })
    });
    within(holding.notified()).await;

    let retries = Arc::new(AtomicU32::new(0));
    let counter = retries.clone();
    let policy_b = RetryPolicy::builder()
        .max_attempts(10)
        .backoff(Backoff::Constant(Duration::from_millis(1)))
        .admission(shared())
        .on_retry(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let waiter = tokio::spawn(txretry::sqlx::transaction_with(
        &pool_b,
        &policy_b,
        &options,
        async move |tx| {
            sqlx::query(sql(update.clone())).execute(&mut **tx).await?;
            Ok::<_, sqlx::Error>(())
        },
    ));
    wait_for_advisory_wait(&mut observer, &b).await;
    release.notify_one();
    within(holder).await.unwrap().unwrap();
    within(waiter).await.unwrap().unwrap();
    assert_eq!(
        retries.load(Ordering::SeqCst),
        0,
        "no serialization failure"
    );
    let v: i32 = sqlx::query_scalar(sql(format!("SELECT v FROM {table}")))
        .fetch_one(&mut observer)
        .await
        .unwrap();
    assert_eq!(v, 2);
    drop_table(&url, &table).await;
}

/// The query of the `app` session that waits for an advisory lock, once one does.
async fn waiting_query(observer: &mut PgConnection, app: &str) -> String {
    wait_for_advisory_wait(observer, app).await;
    sqlx::query_scalar(
        "SELECT query FROM pg_stat_activity
         WHERE application_name = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
    )
    .bind(app)
    .fetch_one(observer)
    .await
    .unwrap()
}

/// A key nobody holds is tried in BEGIN's round trip and held for the whole transaction;
/// a key another session holds is then waited for in the same attempt (a policy of one
/// attempt still commits), before the snapshot; and for the next second the process waits
/// for that key at once, without trying it first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_held_elsewhere_is_waited_for_in_the_same_attempt() {
    let Some(url) = url("sqlx-postgres admission_db try first") else {
        return;
    };
    let name = txretry_testkit::unique_name("adm_pg_try");
    let (key, id) = key(&name, 1);
    let options = TxOptions::new()
        .isolation(Isolation::RepeatableRead)
        .contends_on(key);
    let (a, b) = (format!("{name}_a"), format!("{name}_b"));
    let (pool_a, pool_b) = (
        process(&url, &a, 1, None).await,
        process(&url, &b, 1, None).await,
    );
    let mut observer = connect(&url).await;
    // One attempt: a failed try that surfaced, or a retry, would fail the test.
    let once = policy(shared(), 1);

    // Free: tried and taken, for the whole transaction.
    let own_locks = within(txretry::sqlx::transaction_with(
        &pool_b,
        &once,
        &options,
        async |tx| {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM pg_locks
                 WHERE pid = pg_backend_pid() AND locktype = 'advisory' AND granted",
            )
            .fetch_one(&mut **tx)
            .await
        },
    ))
    .await
    .unwrap();
    assert_eq!(own_locks, 1);

    for (round, waits_with) in [
        // Tried in BEGIN, found held: the failed transaction is rolled back and the
        // wait begins in the same message.
        (
            "first",
            "ROLLBACK; BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout",
        ),
        // Busy within the last second: no try, the wait at once.
        (
            "second",
            "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout",
        ),
    ] {
        let (holding, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let holder = hold(
            &pool_a,
            &policy(shared(), 1),
            &options,
            holding.clone(),
            release.clone(),
        );
        within(holding.notified()).await;
        let ran = Arc::new(AtomicU32::new(0));
        let counter = ran.clone();
        let waiter = tokio::spawn(txretry::sqlx::transaction_with(
            &pool_b,
            &once,
            &options,
            async move |_tx| {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok::<_, sqlx::Error>(())
            },
        ));
        let query = waiting_query(&mut observer, &b).await;
        assert!(query.starts_with(waits_with), "{round} round: {query}");
        assert_eq!(ran.load(Ordering::SeqCst), 0, "{round} round");
        release.notify_one();
        within(holder).await.unwrap().unwrap();
        within(waiter).await.unwrap().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1, "{round} round");
    }
    assert_eq!(advisory_holders(&mut observer, id).await, 0);
}
