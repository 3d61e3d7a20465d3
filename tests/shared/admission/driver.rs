//! What differs between the drivers ([`Driver`]), and what passes between it and the
//! scenarios: a transaction's instructions ([`Then`], [`Interval`], [`OnRow`]), how it
//! failed ([`Failed`], [`Said`]), what the server shows of a session ([`SessionState`]),
//! and which binary runs them ([`Binary`]).

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{Notify, mpsc};
use txretry::{Outcome, RetryPolicy, StopReason, TransientKind, TxOptions, Verdict};
use txretry_testkit::intervals::Meet;

use super::{Server, key};
use crate::admission_db::Db;

/// What a transaction of [`Driver::run`] does once it holds its keys (after it has sent
/// its session's id).
pub enum Then {
    /// Commits.
    Commit,
    /// Waits for the notification, then commits.
    WaitFor(Arc<Notify>),
    /// Sleeps a minute in the server ([`Server::sleep_a_minute`]).
    SleepInServer,
    /// Sends the one integer the query selects, then commits.
    Select(String, Started),
    /// Fails with an error of the application's, not the database's: a business error.
    Refuse,
}

/// Where a transaction of [`Driver::run`] sends its session's id, each time it runs (and
/// what [`Then::Select`] selects).
pub type Started = mpsc::UnboundedSender<i64>;

/// What a driver's error says, as the driver reports it.
#[derive(Debug)]
pub struct Said {
    /// Its SQLSTATE.
    pub sqlstate: Option<String>,
    /// Its MySQL error number (`None` on Postgres).
    pub number: Option<u16>,
    /// The server's message, or the runner's own.
    pub message: String,
}

/// How a transaction of [`Driver::run`] failed: the runner's outcome, and what the error
/// says.
#[derive(Debug)]
pub struct Failed {
    pub outcome: Outcome,
    pub said: Said,
}

impl Failed {
    /// From the runner's error; `said` reads the driver's error.
    pub fn of<E>(err: txretry::TxError<E>, said: impl FnOnce(&E) -> Said) -> Self {
        Failed {
            outcome: err.outcome().clone(),
            said: said(err.error()),
        }
    }
}

/// What the server shows of a session ([`Server::session_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // each binary names one of them as its `AFTER_CANCEL`
pub enum SessionState {
    /// Not connected.
    Gone = 0,
    /// Connected and idle.
    Idle = 1,
    /// Connected and running a statement (or in a transaction, on Postgres).
    Busy = 2,
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
    /// A process of up to `workers` sessions, which carry `app` where the server shows it;
    /// each new session runs `setup` first, if any.
    fn process(
        url: &str,
        app: &str,
        workers: u32,
        setup: Option<&'static str>,
    ) -> impl Future<Output = Self::Process> + Send;
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

    /// What becomes of a session whose attempt was dropped while it waited for a key:
    /// [`Gone`](SessionState::Gone) where a pool closes its connection (the default),
    /// [`Idle`](SessionState::Idle) where the caller keeps its client.
    const AFTER_CANCEL: SessionState = SessionState::Gone;
    /// How a transaction stops whose session was killed under it, under a policy that
    /// does not retry a lost connection: [`NotRetryable`](StopReason::NotRetryable) where
    /// a pool could give a retry another session (the default), and
    /// [`ConnectionUnusable`](StopReason::ConnectionUnusable) where the caller's one client
    /// is broken.
    const KILLED: StopReason = StopReason::NotRetryable;
    /// Runs one transaction on `worker` under `policy` and `options`: each attempt sends
    /// its session's id ([`Server::session_id`]) to `started`, then does what `then` says.
    fn run(
        worker: &mut Self::Worker,
        policy: &RetryPolicy,
        options: &TxOptions,
        started: Started,
        then: Then,
    ) -> impl Future<Output = Result<(), Failed>> + Send;
}
