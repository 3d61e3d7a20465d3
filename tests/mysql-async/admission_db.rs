//! Admission across processes, on the database (`Admission::in_database`): named locks
//! (`GET_LOCK`). Two pools stand in for two processes: each has its own policy and its own
//! `Admission`, so only the database can make them take turns. The pools do not reset
//! connections they get back (`reset_connection=false`, which would also drop named
//! locks), so only the runner's own release keeps them clean. Every wait is observed in
//! `information_schema.processlist`, and every lock with `IS_USED_LOCK`, never timed. The
//! scenarios every driver has are in `tests/shared/admission/`; [`Db`] is how they run here.
//! The ones here are MySQL's own.

use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, Pool};
use tokio::sync::{Notify, mpsc};
use txretry::{Admission, Code, RetryPolicy, TransientKind, TxError, TxOptions, Verdict};
use txretry_testkit::intervals::{WAIT, policy, shared};
use txretry_testkit::wait::{poll_until, within};

use crate::admission::{
    Binary, Driver, Failed, Interval, OnRow, Said, Server, Started, Then, lock_name,
    lock_wait_timed_out,
};

fn url(test: &str) -> Option<String> {
    txretry_testkit::mysql_url(test)
}

/// A pool standing in for one process: up to `max` connections, kept when idle and not
/// reset between uses; its sessions run `setup` first, if any.
fn process(url: &str, max: usize, setup: Option<&'static str>) -> Pool {
    let params = format!("pool_min=1&pool_max={max}&reset_connection=false");
    let init = setup.into_iter().map(String::from).collect();
    crate::common::pool_with_init(url, &params, init)
}

async fn connect(url: &str) -> Conn {
    crate::common::direct_conn(url).await
}

/// The key a test's transactions contend on, and the name of its named lock.
fn key(name: &str, n: i64) -> ((String, i64), String) {
    let key = (name.to_string(), n);
    let lock = lock_name(&key);
    (key, lock)
}

/// The session's id.
async fn session_id<Q: Queryable>(conn: &mut Q) -> u64 {
    conn.query_first("SELECT CAST(CONNECTION_ID() AS UNSIGNED)")
        .await
        .unwrap()
        .unwrap()
}

/// The session holding named lock `lock`, if any (`IS_USED_LOCK`).
async fn lock_holder<Q: Queryable>(conn: &mut Q, lock: &str) -> Option<u64> {
    conn.exec_first("SELECT CAST(IS_USED_LOCK(?) AS UNSIGNED)", (lock,))
        .await
        .unwrap()
        .unwrap()
}

/// Waits until a session waits in `GET_LOCK` on `lock` (with `WAIT`), and returns its id.
async fn wait_for_get_lock(observer: &mut Conn, lock: &str) -> u64 {
    // The runner's one statement for all its keys calls `GET_LOCK('<lock>', <seconds>)`.
    let statement = format!("GET_LOCK('{lock}', {})", WAIT.as_secs());
    let mut waiter = None;
    poll_until(format!("nobody ever waited in {statement}"), async || {
        waiter = observer
            .exec_first(
                "SELECT CAST(id AS UNSIGNED) FROM information_schema.processlist
                 WHERE INSTR(info, ?) > 0 AND state = 'User lock'",
                (&statement,),
            )
            .await
            .unwrap();
        waiter.is_some()
    })
    .await;
    waiter.unwrap()
}

/// mysql_async for the scenarios of `tests/shared/admission/`.
pub struct Db;

impl Driver for Db {
    const BINARY: Binary = Binary::new("mysql_async", "adm_ma", Server::MySql);
    type Process = Pool;
    type Worker = Pool;

    async fn exec(url: &str, sql: String) {
        connect(url).await.query_drop(sql).await.unwrap();
    }

    async fn query_i64(url: &str, sql: String) -> i64 {
        connect(url).await.query_first(sql).await.unwrap().unwrap()
    }

    async fn process(url: &str, _app: &str, workers: u32, setup: Option<&'static str>) -> Pool {
        process(url, workers as usize, setup)
    }

    async fn worker(pool: &Pool) -> Pool {
        pool.clone()
    }

    async fn record(pool: &mut Pool, policy: &RetryPolicy, options: &TxOptions, i: Interval) {
        let (insert, update) = (i.insert(), i.update());
        txretry::mysql_async::transaction_with(&*pool, policy, options, async move |tx| {
            tx.exec_drop(&insert, (i.k, i.process)).await?;
            let id = tx.last_insert_id().expect("an auto-increment id");
            i.meet.meet().await;
            tx.query_drop(i.sleep()).await?;
            tx.exec_drop(&update, (id,)).await
        })
        .await
        .unwrap();
    }

    async fn close(pool: Pool) {
        pool.disconnect().await.unwrap();
    }

    /// Counts whether its session holds the row's named lock (taken before START
    /// TRANSACTION). With `collide`, another session holds the row (an uncommitted update)
    /// when the transaction starts, and the first attempt's own UPDATE times out after 1 s
    /// (1205, a lock-wait timeout); that session commits right after, before the attempt
    /// fails.
    async fn held_per_attempt(pool: &mut Pool, policy: &RetryPolicy, row: OnRow<'_>) -> Vec<i64> {
        let lock = lock_name(&row.key());
        let update = row.update();
        let mut holder = None;
        if row.collide {
            let mut conn = connect(row.url).await;
            conn.query_drop("START TRANSACTION").await.unwrap();
            conn.query_drop(&update).await.unwrap();
            holder = Some(conn);
        }
        let mut held = Vec::new();
        let options = TxOptions::new().contends_on(row.key());
        txretry::mysql_async::transaction_with(&*pool, policy, &options, async |tx| {
            let n: Option<i64> = tx
                .exec_first(
                    "SELECT COALESCE(IS_USED_LOCK(?) = CONNECTION_ID(), 0)",
                    (&lock,),
                )
                .await?;
            held.push(n.unwrap());
            if let Some(mut holder) = holder.take() {
                tx.query_drop("SET SESSION innodb_lock_wait_timeout = 1")
                    .await?;
                let blocked = tx.query_drop(&update).await;
                holder.query_drop("COMMIT").await.unwrap();
                return Err(lock_wait_timed_out(blocked));
            }
            tx.query_drop(&update).await
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
        pool: &mut Pool,
        policy: &RetryPolicy,
        options: &TxOptions,
        started: Started,
        then: Then,
    ) -> Result<(), Failed> {
        let server = Self::BINARY.server;
        txretry::mysql_async::transaction_with(&*pool, policy, options, async move |tx| {
            let me: Option<i64> = tx.query_first(server.session_id()).await?;
            // A test that does not look at the ids has dropped the receiver.
            let _ = started.send(me.expect("a session id"));
            match &then {
                Then::Commit => {}
                Then::WaitFor(release) => release.notified().await,
                Then::SleepInServer => tx.query_drop(server.sleep_a_minute()).await?,
                Then::Select(query, to) => {
                    let selected: Option<i64> = tx.query_first(*query).await?;
                    let _ = to.send(selected.expect("a row"));
                }
            }
            Ok::<_, mysql_async::Error>(())
        })
        .await
        .map_err(|err| {
            Failed::of(err, |err| match err {
                mysql_async::Error::Server(server) => Said {
                    sqlstate: Some(server.state.clone()),
                    number: Some(server.code),
                    message: server.message.clone(),
                },
                other => Said {
                    sqlstate: None,
                    number: None,
                    message: other.to_string(),
                },
            })
        })
    }
}

/// A transaction under `options`' keys that does nothing (the runner's future).
fn nothing(
    pool: &Pool,
    policy: &RetryPolicy,
    options: &TxOptions,
) -> impl Future<Output = Result<(), TxError<mysql_async::Error>>> + Send + use<> {
    txretry::mysql_async::transaction_with(pool, policy, options, async |_tx| {
        Ok::<_, mysql_async::Error>(())
    })
}

type Held = tokio::task::JoinHandle<Result<(), TxError<mysql_async::Error>>>;

/// A transaction that holds `options`' key until `release` is notified; `holding` gets the
/// session id once it runs (inside the transaction, after its locks).
fn hold(
    pool: &Pool,
    options: &TxOptions,
    holding: mpsc::UnboundedSender<u64>,
    release: Arc<Notify>,
) -> Held {
    tokio::spawn(txretry::mysql_async::transaction_with(
        pool,
        &policy(shared(), 1),
        options,
        async move |tx| {
            holding.send(session_id(tx).await).unwrap();
            release.notified().await;
            Ok::<_, mysql_async::Error>(())
        },
    ))
}

/// After a commit, a business error, a database error and a lock not granted in time, the
/// connection goes back to the pool (the same session serves every call) holding no named
/// lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_go_back_to_the_pool_without_named_locks() {
    let Some(url) = url("mysql_async::admission_db pool") else {
        return;
    };
    let name = txretry_testkit::unique_name("adm_ma_pool");
    let keys: Vec<_> = (0..3).map(|n| key(&name, n)).collect();
    let all = keys.iter().fold(TxOptions::new(), |options, (key, _)| {
        options.contends_on(key.clone())
    });
    let pool = process(&url, 1, None);
    let policy = policy(Admission::per_key().in_database(Duration::from_secs(1)), 1);
    let mut observer = connect(&url).await;
    let session = session_id(&mut pool.get_conn().await.unwrap()).await;

    async fn no_lock_held(observer: &mut Conn, keys: &[((String, i64), String)], after: &str) {
        for (_, lock) in keys {
            assert_eq!(
                lock_holder(observer, lock).await,
                None,
                "{lock} after {after}"
            );
        }
    }

    // A commit, holding all three keys inside.
    let inside = txretry::mysql_async::transaction_with(&pool, &policy, &all, async |tx| {
        let mut holders = Vec::new();
        for (_, lock) in &keys {
            holders.push(lock_holder(tx, lock).await);
        }
        Ok::<_, mysql_async::Error>((session_id(tx).await, holders))
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
    let err = txretry::mysql_async::transaction_with(&pool, &policy, &all, async |_tx| {
        Err::<(), _>(mysql_async::Error::Other("refund refused".into()))
    })
    .await
    .unwrap_err();
    assert_eq!(err.outcome().verdict(), Verdict::Permanent);
    no_lock_held(&mut observer, &keys, "a business error").await;

    // A database error.
    let missing = format!("SELECT * FROM {name}_missing");
    let err = txretry::mysql_async::transaction_with(&pool, &policy, &all, async |tx| {
        tx.query_drop(&missing).await
    })
    .await
    .unwrap_err();
    assert_eq!(err.outcome().code(), Some(Code::MySql(1146)));
    no_lock_held(&mut observer, &keys, "a database error").await;

    // A lock not granted in time: the observer holds the last key.
    let last = &keys[2].1;
    let got: Option<i64> = observer
        .query_first(format!("SELECT GET_LOCK('{last}', 0)"))
        .await
        .unwrap();
    assert_eq!(got, Some(1));
    let err = within(nothing(&pool, &policy, &all)).await.unwrap_err();
    assert_eq!(
        err.outcome().verdict(),
        Verdict::Transient(TransientKind::LockTimeout)
    );
    // The keys before it in lock order were granted in the same statement; the refusal
    // names the one that was not.
    assert!(err.to_string().contains(&format!("'{last}'")), "{err}");
    let observer_id = session_id(&mut observer).await;
    assert_eq!(lock_holder(&mut observer, last).await, Some(observer_id));
    observer.query_drop("DO RELEASE_ALL_LOCKS()").await.unwrap();
    no_lock_held(&mut observer, &keys, "a lock not granted").await;

    let still = session_id(&mut pool.get_conn().await.unwrap()).await;
    assert_eq!(still, session, "the one connection was pooled every time");
    pool.disconnect().await.unwrap();
}

/// `KILL QUERY` on a waiting `GET_LOCK` makes it return NULL: the attempt fails with
/// 1317 (interrupted), which is permanent, and the session goes back to the pool clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_wait_is_permanent() {
    let Some(url) = url("mysql_async::admission_db interrupted") else {
        return;
    };
    let name = txretry_testkit::unique_name("adm_ma_interrupted");
    let (key, lock) = key(&name, 1);
    let options = TxOptions::new().contends_on(key);
    let (pool_a, pool_b) = (process(&url, 1, None), process(&url, 1, None));
    let mut observer = connect(&url).await;

    let (holding, mut held) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let holder = hold(&pool_a, &options, holding, release.clone());
    let holder_id = within(held.recv()).await.unwrap();

    let waiter = tokio::spawn(nothing(&pool_b, &policy(shared(), 3), &options));
    let waiter_id = wait_for_get_lock(&mut observer, &lock).await;
    observer
        .query_drop(format!("KILL QUERY {waiter_id}"))
        .await
        .unwrap();
    let err = within(waiter).await.unwrap().expect_err("interrupted");
    let outcome = err.outcome();
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{err:?}");
    assert_eq!(outcome.code(), Some(Code::MySql(1317)));
    assert_eq!(outcome.attempts(), 1, "not retried");
    match err.error() {
        mysql_async::Error::Server(server) => {
            assert_eq!(server.state, "70100");
            assert!(server.message.contains("interrupted"), "{server:?}");
        }
        other => panic!("not the runner's 1317: {other:?}"),
    }
    assert_eq!(
        lock_holder(&mut observer, &lock).await,
        Some(holder_id),
        "only A's"
    );
    // B's session went back to the pool.
    let mut conn = pool_b.get_conn().await.unwrap();
    assert_eq!(session_id(&mut conn).await, waiter_id);
    drop(conn);

    release.notify_one();
    within(holder).await.unwrap().unwrap();
    assert_eq!(lock_holder(&mut observer, &lock).await, None);
}
