//! Admission across processes, on the database (`Admission::in_database`), written once for
//! every driver: two processes (see `txretry_testkit::intervals`) that must take turns on a
//! key ([`processes`]). Each binary's `admission_db` module implements [`Driver`] (how it connects, makes a
//! process, runs the runner and a statement, and what the server says about a key's lock)
//! and keeps the scenarios only its driver has.

mod processes;

use std::future::Future;

use txretry::{RetryPolicy, TransientKind, TxOptions, Verdict};
use txretry_testkit::intervals::Meet;

use crate::admission_db::Db;

/// The server a binary's driver talks to.
#[allow(dead_code)] // each binary names one of them
pub enum Server {
    Postgres,
    MySql,
}

impl Server {
    /// The server's URL, or `None` to skip `test`.
    fn url(&self, test: &str) -> Option<String> {
        match self {
            Server::Postgres => txretry_testkit::postgres_url(test),
            Server::MySql => txretry_testkit::mysql_url(test),
        }
    }

    /// `CREATE TABLE {table}` for the intervals: an `id` the server numbers, the key `k`,
    /// the `process`, and when the transaction `started` and `ended` (microseconds).
    /// What follows a `CREATE TABLE`'s column list.
    fn table_options(&self) -> &'static str {
        match self {
            Server::Postgres => "",
            Server::MySql => " ENGINE=InnoDB",
        }
    }

    fn interval_table(&self, table: &str) -> String {
        match self {
            Server::Postgres => format!(
                "CREATE TABLE {table} (id bigserial PRIMARY KEY, k bigint NOT NULL,
                 process bigint NOT NULL, started timestamptz NOT NULL, ended timestamptz NOT NULL)"
            ),
            Server::MySql => format!(
                "CREATE TABLE {table} (id bigint AUTO_INCREMENT PRIMARY KEY, k bigint NOT NULL,
                 process bigint NOT NULL, started datetime(6) NOT NULL, ended datetime(6) NOT NULL)
                 ENGINE=InnoDB"
            ),
        }
    }
}

/// One transaction of a process: it inserts a row into `table` (`k`, `process`, both times
/// now), meets `meet`, sleeps 2 ms in the server and sets `ended` to now.
pub struct Interval {
    pub table: String,
    pub k: i64,
    pub process: i64,
    pub meet: Meet,
}

/// A transaction of `contended_keys_are_locked_after_their_first_collision`: row `id` of
/// `table`, on the server at `url`.
pub struct OnRow<'a> {
    pub url: &'a str,
    pub table: &'a str,
    pub id: i64,
    pub collide: bool,
}

impl OnRow<'_> {
    /// The key the transaction contends on.
    pub fn key(&self) -> (String, i64) {
        key(self.table, self.id)
    }

    /// The transaction's write (and, with `collide`, the other session's).
    pub fn update(&self) -> String {
        format!("UPDATE {} SET v = v + 1 WHERE id = {}", self.table, self.id)
    }

    /// A read of the row.
    pub fn select(&self) -> String {
        format!("SELECT v FROM {} WHERE id = {}", self.table, self.id)
    }
}

/// The error of a write `blocked` behind another session's row lock (on MySQL): a
/// lock-wait timeout, which the runner retries.
#[allow(dead_code)] // only the MySQL binaries use it
pub fn lock_wait_timed_out<T: std::fmt::Debug, E: std::error::Error + 'static>(
    blocked: Result<T, E>,
) -> E {
    let err = blocked.expect_err("the other session holds the row");
    assert_eq!(
        txretry::classify(&err).verdict,
        Verdict::Transient(TransientKind::LockTimeout),
        "{err:?}"
    );
    err
}

impl Interval {
    /// The row's INSERT: `k` and `process` are its parameters; on Postgres it returns the
    /// row's `id`.
    pub fn insert(&self) -> String {
        let table = &self.table;
        match Db::BINARY.server {
            Server::Postgres => format!(
                "INSERT INTO {table} (k, process, started, ended)
                 VALUES ($1, $2, clock_timestamp(), clock_timestamp()) RETURNING id"
            ),
            Server::MySql => format!(
                "INSERT INTO {table} (k, process, started, ended) VALUES (?, ?, NOW(6), NOW(6))"
            ),
        }
    }

    /// The sleep in the server, inside the transaction.
    pub fn sleep(&self) -> &'static str {
        match Db::BINARY.server {
            Server::Postgres => "SELECT pg_sleep(0.002)",
            Server::MySql => "DO SLEEP(0.002)",
        }
    }

    /// The row's UPDATE of `ended`: the `id` is its parameter.
    pub fn update(&self) -> String {
        let table = &self.table;
        match Db::BINARY.server {
            Server::Postgres => {
                format!("UPDATE {table} SET ended = clock_timestamp() WHERE id = $1")
            }
            Server::MySql => format!("UPDATE {table} SET ended = NOW(6) WHERE id = ?"),
        }
    }
}

/// Which binary runs the scenarios.
pub struct Binary {
    /// The test binary, for naming tests in skip messages.
    pub name: &'static str,
    /// How its tables begin (`adm_pg`, `adm_my`, …).
    pub prefix: &'static str,
    pub server: Server,
}

impl Binary {
    pub const fn new(name: &'static str, prefix: &'static str, server: Server) -> Self {
        Binary {
            name,
            prefix,
            server,
        }
    }
}

/// What differs between the drivers, for the scenarios here.
pub trait Driver {
    const BINARY: Binary;
    /// A process: a pool, or what its workers need to open sessions of their own.
    type Process: Send;
    /// What one worker of a process runs its transactions on: a clone of the pool, or a
    /// session of its own.
    type Worker: Send + 'static;

    /// Runs one statement on a new session.
    fn exec(url: &str, sql: String) -> impl Future<Output = ()> + Send;
    /// The one integer `sql` selects, on a new session.
    fn query_i64(url: &str, sql: String) -> impl Future<Output = i64> + Send;
    /// A process of up to `workers` sessions, which carry `app` where the server shows it.
    fn process(url: &str, app: &str, workers: u32) -> impl Future<Output = Self::Process> + Send;
    /// A worker of `process`.
    fn worker(process: &Self::Process) -> impl Future<Output = Self::Worker> + Send;
    /// Runs `interval` under `policy` and `options`; panics if it fails.
    fn record(
        worker: &mut Self::Worker,
        policy: &RetryPolicy,
        options: &TxOptions,
        interval: Interval,
    ) -> impl Future<Output = ()> + Send;
    /// Closes a process's pool.
    fn close(process: Self::Process) -> impl Future<Output = ()> + Send;
    /// Runs one transaction on `row` (contending on `key(table, id)`) and returns, per
    /// attempt, how many of the key's locks its session held; with `collide`, the first
    /// attempt meets a real collision on the row, one the runner retries.
    fn held_per_attempt(
        worker: &mut Self::Worker,
        policy: &RetryPolicy,
        row: OnRow<'_>,
    ) -> impl Future<Output = Vec<i64>>;
    /// How many sessions hold (and, on Postgres, wait for) the database lock of `key`.
    fn key_holders(url: &str, key: &(String, i64)) -> impl Future<Output = i64> + Send;
}

/// The key a test's transactions contend on: `(name, n)`.
pub fn key(name: &str, n: i64) -> (String, i64) {
    (name.to_string(), n)
}
