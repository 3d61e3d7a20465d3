//! Admission across processes, on the database (`Admission::in_database`): named locks
//! (`GET_LOCK`). Two pools stand in for two processes: each has its own policy and its own
//! `Admission`, so only the database can make them take turns. Every wait is observed in
//! `information_schema.processlist`, and every lock with `IS_USED_LOCK`, never timed. The
//! scenarios every driver has are in `tests/shared/admission/`; [`Db`] is how they run here.
//! The ones here are MySQL's own.

use std::sync::Arc;
use std::time::Duration;

use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{Executor, MySqlConnection};
use tokio::sync::{Notify, mpsc};
use txretry::{Admission, Code, RetryPolicy, TransientKind, TxError, TxOptions, Verdict};
use txretry_testkit::intervals::{WAIT, policy, shared};
use txretry_testkit::wait::{poll_until, within};

use crate::admission::{
    Binary, Driver, Failed, Interval, OnRow, Server, Started, Then, lock_name, lock_wait_timed_out,
};
use crate::common::{connect, exec, sql};

fn url(test: &str) -> Option<String> {
    txretry_testkit::mysql_url(test)
}

/// A pool standing in for one process; its sessions run `setup` first, if any.
async fn process(url: &str, max_connections: u32, setup: Option<&'static str>) -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(max_connections)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                if let Some(setup) = setup {
                    conn.execute(setup).await?;
                }
                Ok(())
            })
        })
        .connect(url)
        .await
        .unwrap()
}

/// The key a test's transactions contend on, and the name of its named lock.
fn key(name: &str, n: i64) -> ((String, i64), String) {
    let key = (name.to_string(), n);
    let lock = lock_name(&key);
    (key, lock)
}

/// The session holding named lock `lock`, if any (`IS_USED_LOCK`).
async fn lock_holder(observer: &mut MySqlConnection, lock: &str) -> Option<u64> {
    sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) AS UNSIGNED)")
        .bind(lock)
        .fetch_one(observer)
        .await
        .unwrap()
}

/// Waits until a session waits in `GET_LOCK` on `lock` (with `WAIT`), and returns its id.
async fn wait_for_get_lock(observer: &mut MySqlConnection, lock: &str) -> u64 {
    // The runner's one statement for all its keys calls `GET_LOCK('<lock>', <seconds>)`.
    let statement = format!("GET_LOCK('{lock}', {})", WAIT.as_secs());
    let mut waiter = None;
    poll_until(format!("nobody ever waited in {statement}"), async || {
        waiter = sqlx::query_scalar(
            "SELECT CAST(id AS UNSIGNED) FROM information_schema.processlist
                 WHERE INSTR(info, ?) > 0 AND state = 'User lock'",
        )
        .bind(&statement)
        .fetch_optional(&mut *observer)
        .await
        .unwrap();
        waiter.is_some()
    })
    .await;
    waiter.unwrap()
}

/// sqlx on MySQL for the scenarios of `tests/shared/admission/`.
pub struct Db;

impl Driver for Db {
    const BINARY: Binary = Binary::new("sqlx-mysql", "adm_my", Server::MySql);
    type Process = MySqlPool;
    type Worker = MySqlPool;

    async fn exec(url: &str, text: String) {
        exec(&mut connect(url).await, text).await;
    }

    async fn query_i64(url: &str, text: String) -> i64 {
        sqlx::query_scalar(sql(text))
            .fetch_one(&mut connect(url).await)
            .await
            .unwrap()
    }

    async fn process(
        url: &str,
        _app: &str,
        workers: u32,
        setup: Option<&'static str>,
    ) -> MySqlPool {
        process(url, workers, setup).await
    }

    async fn worker(pool: &MySqlPool) -> MySqlPool {
        pool.clone()
    }

    async fn record(pool: &mut MySqlPool, policy: &RetryPolicy, options: &TxOptions, i: Interval) {
        let (insert, update) = (i.insert(), i.update());
        txretry::sqlx::transaction_with(&*pool, policy, options, async move |tx| {
            let id = sqlx::query(sql(insert.clone()))
                .bind(i.k)
                .bind(i.process)
                .execute(&mut **tx)
                .await?
                .last_insert_id();
            i.meet.meet().await;
            sqlx::query(i.sleep()).execute(&mut **tx).await?;
            sqlx::query(sql(update.clone()))
                .bind(id)
                .execute(&mut **tx)
                .await?;
            Ok::<_, sqlx::Error>(())
        })
        .await
        .unwrap();
    }

    async fn close(pool: MySqlPool) {
        pool.close().await;
    }

    /// Counts whether its session holds the row's named lock (taken before START
    /// TRANSACTION). With `collide`, another session holds the row (an uncommitted update)
    /// when the transaction starts, and the first attempt's own UPDATE times out after 1 s
    /// (1205, a lock-wait timeout); that session commits right after, before the attempt
    /// fails.
    async fn held_per_attempt(
        pool: &mut MySqlPool,
        policy: &RetryPolicy,
        row: OnRow<'_>,
    ) -> Vec<i64> {
        let lock = lock_name(&row.key());
        let update = row.update();
        let mut holder = None;
        if row.collide {
            let mut conn = connect(row.url).await;
            exec(&mut conn, format!("START TRANSACTION; {update}")).await;
            holder = Some(conn);
        }
        let mut held = Vec::new();
        let options = TxOptions::new().contends_on(row.key());
        txretry::sqlx::transaction_with(&*pool, policy, &options, async |tx| {
            let n: i64 = sqlx::query_scalar(
                "SELECT CAST(COALESCE(IS_USED_LOCK(?) = CONNECTION_ID(), 0) AS SIGNED)",
            )
            .bind(&lock)
            .fetch_one(&mut **tx)
            .await?;
            held.push(n);
            if let Some(mut holder) = holder.take() {
                sqlx::query("SET SESSION innodb_lock_wait_timeout = 1")
                    .execute(&mut **tx)
                    .await?;
                let blocked = sqlx::query(sql(update.clone())).execute(&mut **tx).await;
                exec(&mut holder, "COMMIT".into()).await;
                return Err(lock_wait_timed_out(blocked));
            }
            sqlx::query(sql(update.clone())).execute(&mut **tx).await?;
            Ok::<_, sqlx::Error>(())
        })
        .await
        .unwrap();
        held
    }

    async fn key_holders(url: &str, key: &(String, i64)) -> i64 {
        let lock = lock_name(key);
        lock_holder(&mut connect(url).await, &lock)
            .await
            .map_or(0, |_| 1)
    }

    async fn run(
        pool: &mut MySqlPool,
        policy: &RetryPolicy,
        options: &TxOptions,
        started: Started,
        then: Then,
    ) -> Result<(), Failed> {
        crate::admission_run::run(pool, policy, options, started, then).await
    }
}

/// A transaction under `options`' keys that does nothing (the runner's future).
fn nothing(
    pool: &MySqlPool,
    policy: &RetryPolicy,
    options: &TxOptions,
) -> impl Future<Output = Result<(), TxError<sqlx::Error>>> + Send + use<> {
    txretry::sqlx::transaction_with(pool, policy, options, async |_tx| Ok::<_, sqlx::Error>(()))
}

type Held = tokio::task::JoinHandle<Result<(), TxError<sqlx::Error>>>;

/// A transaction that holds `key` until `release` is notified; `holding` gets the session
/// id once it runs (inside the transaction, after its locks).
fn hold(
    pool: &MySqlPool,
    options: &TxOptions,
    holding: mpsc::UnboundedSender<u64>,
    release: Arc<Notify>,
) -> Held {
    tokio::spawn(txretry::sqlx::transaction_with(
        pool,
        &policy(shared(), 1),
        options,
        async move |tx| {
            let me: u64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
                .fetch_one(&mut **tx)
                .await?;
            holding.send(me).unwrap();
            release.notified().await;
            Ok::<_, sqlx::Error>(())
        },
    ))
}

/// After a commit, a business error, a database error and a lock not granted in time, the
/// connection goes back to the pool (the same session serves every call) holding no named
/// lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_go_back_to_the_pool_without_named_locks() {
    let Some(url) = url("sqlx-mysql admission_db pool") else {
        return;
    };
    let name = txretry_testkit::unique_name("adm_my_pool");
    let keys: Vec<_> = (0..3).map(|n| key(&name, n)).collect();
    let all = keys.iter().fold(TxOptions::new(), |options, (key, _)| {
        options.contends_on(key.clone())
    });
    let pool = process(&url, 1, None).await;
    let policy = policy(Admission::per_key().in_database(Duration::from_secs(1)), 1);
    let mut observer = connect(&url).await;
    let session: u64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
        .fetch_one(&pool)
        .await
        .unwrap();

    async fn no_lock_held(
        observer: &mut MySqlConnection,
        keys: &[((String, i64), String)],
        after: &str,
    ) {
        for (_, lock) in keys {
            assert_eq!(
                lock_holder(observer, lock).await,
                None,
                "{lock} after {after}"
            );
        }
    }

    // A commit, holding all three keys inside.
    let inside = txretry::sqlx::transaction_with(&pool, &policy, &all, async |tx| {
        let mut holders = Vec::new();
        for (_, lock) in &keys {
            holders.push(lock_holder(tx, lock).await);
        }
        let me: u64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
            .fetch_one(&mut **tx)
            .await?;
        Ok::<_, sqlx::Error>((me, holders))
    })
    .await
    .unwrap();
    assert_eq!(inside.0, session);
    assert_eq!(
        inside.1,
        vec![Some(session); 3],
        "held while the transaction ran"
    );
    no_lock_held(&mut observer, &keys, "a commit").await;

    // A business error.
    let err = txretry::sqlx::transaction_with(&pool, &policy, &all, async |_tx| {
        Err::<(), _>(sqlx::Error::RowNotFound)
    })
    .await
    .unwrap_err();
    assert_eq!(err.outcome().verdict(), Verdict::Permanent);
    no_lock_held(&mut observer, &keys, "a business error").await;

    // A database error.
    let err = txretry::sqlx::transaction_with(&pool, &policy, &all, async |tx| {
        sqlx::query(sql(format!("SELECT * FROM {name}_missing")))
            .execute(&mut **tx)
            .await
    })
    .await
    .unwrap_err();
    assert_eq!(err.outcome().code(), Some(Code::MySql(1146)));
    no_lock_held(&mut observer, &keys, "a database error").await;

    // A lock not granted in time: the observer holds the last key.
    let last = &keys[2].1;
    let got: i64 = sqlx::query_scalar(sql(format!("SELECT GET_LOCK('{last}', 0)")))
        .fetch_one(&mut observer)
        .await
        .unwrap();
    assert_eq!(got, 1);
    let err = within(nothing(&pool, &policy, &all)).await.unwrap_err();
    assert_eq!(
        err.outcome().verdict(),
        Verdict::Transient(TransientKind::LockTimeout)
    );
    // The keys before it in lock order were granted in the same statement; the refusal
    // names the one that was not.
    assert!(err.to_string().contains(&format!("'{last}'")), "{err}");
    let observer_id: u64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
        .fetch_one(&mut observer)
        .await
        .unwrap();
    assert_eq!(lock_holder(&mut observer, last).await, Some(observer_id));
    exec(&mut observer, "DO RELEASE_ALL_LOCKS()".into()).await;
    no_lock_held(&mut observer, &keys, "a lock not granted").await;

    let still: u64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(still, session, "the one connection was pooled every time");
}

/// `KILL QUERY` on a waiting `GET_LOCK` makes it return NULL: the attempt fails with
/// 1317 (interrupted), which is permanent, and the session goes back to the pool clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_wait_is_permanent() {
    let Some(url) = url("sqlx-mysql admission_db interrupted") else {
        return;
    };
    let name = txretry_testkit::unique_name("adm_my_interrupted");
    let (key, lock) = key(&name, 1);
    let options = TxOptions::new().contends_on(key);
    let (pool_a, pool_b) = (process(&url, 1, None).await, process(&url, 1, None).await);
    let mut observer = connect(&url).await;

    let (holding, mut held) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let holder = hold(&pool_a, &options, holding, release.clone());
    let holder_id = within(held.recv()).await.unwrap();

    let waiter = tokio::spawn(nothing(&pool_b, &policy(shared(), 3), &options));
    let waiter_id = wait_for_get_lock(&mut observer, &lock).await;
    exec(&mut observer, format!("KILL QUERY {waiter_id}")).await;
    let err = within(waiter).await.unwrap().expect_err("interrupted");
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{err:?}");
    assert_eq!(outcome.code(), Some(Code::MySql(1317)));
    assert_eq!(outcome.attempts(), 1, "not retried");
    let refused = err
        .error()
        .as_database_error()
        .and_then(|db| db.try_downcast_ref::<txretry::sqlx::LockNotGranted>())
        .expect("the runner's own error");
    assert!(!refused.timed_out());
    assert_eq!(refused.number(), 1317);
    assert_eq!(
        lock_holder(&mut observer, &lock).await,
        Some(holder_id),
        "only A's"
    );
    // B's session went back to the pool.
    let again: u64 = sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
        .fetch_one(&pool_b)
        .await
        .unwrap();
    assert_eq!(again, waiter_id);

    release.notify_one();
    within(holder).await.unwrap().unwrap();
    assert_eq!(lock_holder(&mut observer, &lock).await, None);
}
