//! Admission across processes, on the database (`Admission::in_database`): named locks
//! (`GET_LOCK`). Two pools stand in for two processes: each has its own policy and its own
//! `Admission`, so only the database can make them take turns. Every wait is observed in
//! `information_schema.processlist`, and every lock with `IS_USED_LOCK`, never timed. The
//! scenarios are in `tests/shared/admission/`; [`Db`] is how they run here.

use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{Executor, MySqlConnection};
use txretry::{RetryPolicy, TxOptions};

use crate::admission::{
    Binary, Driver, Failed, Interval, OnRow, Server, Started, Then, lock_name, lock_wait_timed_out,
};
use crate::common::{connect, exec, sql};

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

/// The session holding named lock `lock`, if any (`IS_USED_LOCK`).
async fn lock_holder(observer: &mut MySqlConnection, lock: &str) -> Option<u64> {
    sqlx::query_scalar("SELECT CAST(IS_USED_LOCK(?) AS UNSIGNED)")
        .bind(lock)
        .fetch_one(observer)
        .await
        .unwrap()
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
