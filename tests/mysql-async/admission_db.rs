//! Admission across processes, on the database (`Admission::in_database`): named locks
//! (`GET_LOCK`). Two pools stand in for two processes: each has its own policy and its own
//! `Admission`, so only the database can make them take turns. The pools do not reset
//! connections they get back (`reset_connection=false`, which would also drop named
//! locks), so only the runner's own release keeps them clean. Every wait is observed in
//! `information_schema.processlist`, and every lock with `IS_USED_LOCK`, never timed. The
//! scenarios are in `tests/shared/admission/`; [`Db`] is how they run here.

use mysql_async::prelude::*;
use mysql_async::{Conn, Pool};
use txretry::{RetryPolicy, TxOptions};

use crate::admission::{
    Binary, Driver, Failed, Interval, OnRow, Said, Server, Started, Then, lock_name,
    lock_wait_timed_out,
};

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

/// The session holding named lock `lock`, if any (`IS_USED_LOCK`).
async fn lock_holder<Q: Queryable>(conn: &mut Q, lock: &str) -> Option<u64> {
    conn.exec_first("SELECT CAST(IS_USED_LOCK(?) AS UNSIGNED)", (lock,))
        .await
        .unwrap()
        .unwrap()
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
                    let selected: Option<i64> = tx.query_first(query).await?;
                    let _ = to.send(selected.expect("a row"));
                }
                Then::Refuse => return Err(mysql_async::Error::Other("refund refused".into())),
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
