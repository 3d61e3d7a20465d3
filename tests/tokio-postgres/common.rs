//! Shared helpers: connections, tables, a recording policy, lock-wait polling.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::{Client, NoTls};
use txretry::{Backoff, Classification, RetryPolicy, RetryPolicyBuilder};

/// The server URL, or `None` when the test must skip (txretry-testkit printed why).
pub fn url(test: &str) -> Option<String> {
    txretry_testkit::postgres_url(test)
}

/// A new session; its connection future runs on the runtime until the client is dropped.
pub async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("connect to postgres");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// The session's backend process id.
pub async fn backend_pid(client: &Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pg_backend_pid")
        .get(0)
}

/// Waits until session `pid` is blocked on a lock (`pg_stat_activity.wait_event_type =
/// 'Lock'`). Polls; panics after 30 s so a broken setup fails instead of hanging.
pub async fn wait_for_lock_wait(observer: &Client, pid: i32) {
    for _ in 0..3000 {
        let waiting: bool = observer
            .query_one(
                "SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .expect("poll pg_stat_activity")
            .get(0);
        if waiting {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("session {pid} never waited for a lock");
}

/// A unique table name (tests share one database and run in parallel).
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// `CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL)` with rows `1..=rows`, v = 0.
pub async fn create_rows(client: &Client, name: &str, rows: i32) {
    client
        .batch_execute(&format!(
            "CREATE TABLE {name} (id int PRIMARY KEY, v bigint NOT NULL);
             INSERT INTO {name} SELECT g, 0 FROM generate_series(1, {rows}) g;"
        ))
        .await
        .expect("create table");
}

/// The value of row `id`.
pub async fn value(client: &Client, name: &str, id: i32) -> i64 {
    client
        .query_one(&format!("SELECT v FROM {name} WHERE id = $1"), &[&id])
        .await
        .expect("read row")
        .get(0)
}

/// Drops the tables.
pub async fn drop_tables(client: &Client, names: &[&str]) {
    for name in names {
        client
            .batch_execute(&format!("DROP TABLE IF EXISTS {name}"))
            .await
            .expect("drop table");
    }
}

/// What the policy's `on_retry` hook saw: the default classification of each real error
/// that was retried.
pub type Seen = Arc<Mutex<Vec<Classification>>>;

/// A policy builder with short constant backoff whose hook records `txretry::classify` of
/// every retried error.
pub fn recording(max_attempts: u32) -> (RetryPolicyBuilder, Seen) {
    let seen: Seen = Arc::default();
    let sink = Arc::clone(&seen);
    let builder = RetryPolicy::builder()
        .max_attempts(max_attempts)
        .backoff(Backoff::Constant(Duration::from_millis(10)))
        .on_retry(move |event| sink.lock().unwrap().push(txretry::classify(event.error)));
    (builder, seen)
}

/// The recorded classifications.
pub fn retried(seen: &Seen) -> Vec<Classification> {
    seen.lock().unwrap().clone()
}

/// `Code::SqlState` for a literal.
pub fn sqlstate(code: &str) -> txretry::Code {
    txretry::Code::SqlState(txretry::SqlState::new(code).expect("a SQLSTATE"))
}
