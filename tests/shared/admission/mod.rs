//! Admission across processes, on the database (`Admission::in_database`), written once for
//! every driver: two processes (see `txretry_testkit::intervals`) that must take turns on a
//! key ([`processes`]), and a key's holder killed, its waiter cancelled, a lock not granted
//! in time ([`sessions`]). Each binary's `admission_db` module implements [`Driver`] (how it
//! connects, makes a process, runs the runner and a statement, and what the server says
//! about a key's lock) and keeps the scenarios only its driver has. What the two servers
//! say about sessions and locks is SQL here, in [`Server`].

mod processes;
mod sessions;

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{Notify, mpsc};
use txretry::{
    Code, KeyHash, Outcome, RetryPolicy, SqlState, StopReason, TransientKind, TxOptions, Verdict,
};
use txretry_testkit::intervals::{Meet, WAIT};

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

/// Server-side SQL for the session scenarios: `key`s are the tests' own names, never input.
impl Server {
    /// The session's id (`pg_backend_pid()`, `CONNECTION_ID()`), as a bigint.
    pub fn session_id(&self) -> &'static str {
        match self {
            Server::Postgres => "SELECT pg_backend_pid()::bigint",
            Server::MySql => "SELECT CAST(CONNECTION_ID() AS SIGNED)",
        }
    }

    /// A minute's sleep in the server: only the session's end stops it sooner.
    pub fn sleep_a_minute(&self) -> &'static str {
        match self {
            Server::Postgres => "SELECT pg_sleep(60)",
            Server::MySql => "DO SLEEP(60)",
        }
    }

    /// The rows of `pg_locks` that are `key`'s advisory lock, as `pg_advisory_lock(bigint)`
    /// names it: its number's high and low 32 bits in `classid` and `objid`.
    fn advisory_locks(key: &(String, i64)) -> String {
        format!(
            "pg_locks WHERE locktype = 'advisory' AND objsubid = 1
             AND ((classid::bigint << 32) | objid::bigint) = {}",
            KeyHash::of(key).to_i64()
        )
    }

    /// The id of a session waiting on the server for `key`'s lock, or 0: a not granted
    /// advisory lock, or a session in the runner's `GET_LOCK('<lock>', <WAIT>)` on the key's
    /// named lock (the wait of [`shared`](txretry_testkit::intervals::shared)).
    fn waiting_for(&self, key: &(String, i64)) -> String {
        match self {
            Server::Postgres => format!(
                "SELECT COALESCE(max(pid), 0)::bigint FROM {} AND NOT granted",
                Self::advisory_locks(key)
            ),
            Server::MySql => format!(
                "SELECT COALESCE(MAX(CAST(id AS SIGNED)), 0) FROM information_schema.processlist
                 WHERE state = 'User lock' AND INSTR(info, 'GET_LOCK(''{}'', {})') > 0",
                lock_name(key),
                WAIT.as_secs()
            ),
        }
    }

    /// The id of the session holding `key`'s lock, or 0 (`IS_USED_LOCK` on MySQL).
    fn holder_of(&self, key: &(String, i64)) -> String {
        match self {
            Server::Postgres => format!(
                "SELECT COALESCE(max(pid), 0)::bigint FROM {} AND granted",
                Self::advisory_locks(key)
            ),
            Server::MySql => format!(
                "SELECT COALESCE(CAST(IS_USED_LOCK('{}') AS SIGNED), 0)",
                lock_name(key)
            ),
        }
    }

    /// Ends session `id` (its connection with it).
    fn kill(&self, id: i64) -> String {
        match self {
            Server::Postgres => format!("SELECT pg_terminate_backend({id})"),
            Server::MySql => format!("KILL {id}"),
        }
    }

    /// What the server shows of session `id`, as a [`SessionState`] number.
    fn session_state(&self, id: i64) -> String {
        match self {
            Server::Postgres => format!(
                "SELECT COALESCE(max(CASE WHEN state = 'idle' THEN 1 ELSE 2 END), 0)::bigint
                 FROM pg_stat_activity WHERE pid = {id}"
            ),
            Server::MySql => format!(
                "SELECT COALESCE(MAX(IF(command = 'Sleep', 1, 2)), 0)
                 FROM information_schema.processlist WHERE id = {id}"
            ),
        }
    }

    /// 1 if a new session can take `key`'s lock at once (it lets go of it in the same
    /// statement), else 0.
    fn key_free(&self, key: &(String, i64)) -> String {
        match self {
            Server::Postgres => {
                let id = KeyHash::of(key).to_i64();
                format!(
                    "SELECT (pg_try_advisory_lock({id}) AND pg_advisory_unlock({id}))::int::bigint"
                )
            }
            Server::MySql => {
                let lock = lock_name(key);
                format!(
                    "SELECT CAST(GET_LOCK('{lock}', 0) = 1 AND RELEASE_LOCK('{lock}') = 1 AS SIGNED)"
                )
            }
        }
    }

    /// A session setting a process sets on each of its sessions, which the runner's
    /// transactions (and its waits for keys) must keep: the statement that sets it, and a
    /// query of 1 while it is still set. Postgres's `lock_timeout` (the runner sets its own,
    /// `LOCAL`, for a wait), InnoDB's lock-wait timeout on MySQL.
    fn own_setting(&self) -> (&'static str, &'static str) {
        match self {
            Server::Postgres => (
                "SET lock_timeout = '7s'",
                "SELECT (current_setting('lock_timeout') = '7s')::int::bigint",
            ),
            Server::MySql => (
                "SET SESSION innodb_lock_wait_timeout = 7",
                "SELECT CAST(@@SESSION.innodb_lock_wait_timeout = 7 AS SIGNED)",
            ),
        }
    }

    /// How many of `keys`' locks the session running it holds.
    fn held_here(&self, keys: &[(String, i64)]) -> String {
        match self {
            Server::Postgres => {
                let ids: Vec<String> = keys
                    .iter()
                    .map(|key| KeyHash::of(key).to_i64().to_string())
                    .collect();
                format!(
                    "SELECT count(*)::bigint FROM pg_locks WHERE locktype = 'advisory'
                     AND objsubid = 1 AND granted AND pid = pg_backend_pid()
                     AND ((classid::bigint << 32) | objid::bigint) IN ({})",
                    ids.join(", ")
                )
            }
            Server::MySql => {
                let held: Vec<String> = keys
                    .iter()
                    .map(|key| {
                        format!(
                            "COALESCE(IS_USED_LOCK('{}') = CONNECTION_ID(), 0)",
                            lock_name(key)
                        )
                    })
                    .collect();
                format!("SELECT CAST({} AS SIGNED)", held.join(" + "))
            }
        }
    }

    /// Cancels the statement session `id` is running (its session stays).
    fn cancel(&self, id: i64) -> String {
        match self {
            Server::Postgres => format!("SELECT pg_cancel_backend({id})"),
            Server::MySql => format!("KILL QUERY {id}"),
        }
    }

    /// A statement on a missing table: a database error the runner does not retry.
    fn missing_table(&self, table: &str) -> String {
        format!("SELECT count(*) FROM {table}_missing")
    }

    /// What the driver reports when the runner's wait for `key`'s lock was cancelled
    /// ([`Server::cancel`]): Postgres's `query_canceled` (57014); on MySQL the runner's
    /// 1317 (`GET_LOCK` returned NULL), which names the lock. Both permanent.
    fn wait_cancelled(&self, key: &(String, i64)) -> Refusal {
        match self {
            Server::Postgres => Refusal {
                code: Code::SqlState(SqlState::new("57014").unwrap()),
                sqlstate: "57014",
                number: None,
                message_starts: None,
            },
            Server::MySql => Refusal {
                code: Code::MySql(1317),
                sqlstate: "70100",
                number: Some(1317),
                message_starts: Some(format!(
                    "txretry admission: the wait for named lock '{}' was interrupted",
                    lock_name(key)
                )),
            },
        }
    }

    /// What the driver reports when the runner's lock of `key` was not granted within the
    /// wait: Postgres's own `lock_timeout` (55P03); on MySQL the runner's 1205 (SQLSTATE
    /// HY000), which names the lock, for a `GET_LOCK` that timed out.
    fn lock_timeout(&self, key: &(String, i64)) -> Refusal {
        match self {
            Server::Postgres => Refusal {
                code: Code::SqlState(SqlState::new("55P03").unwrap()),
                sqlstate: "55P03",
                number: None,
                message_starts: None,
            },
            Server::MySql => Refusal {
                code: Code::MySql(1205),
                sqlstate: "HY000",
                number: Some(1205),
                message_starts: Some(format!(
                    "txretry admission: named lock '{}' not granted within ",
                    lock_name(key)
                )),
            },
        }
    }
}

/// What a driver reports for a lock not granted in time ([`Server::lock_timeout`]).
struct Refusal {
    /// The outcome's code.
    code: Code,
    /// The error's SQLSTATE.
    sqlstate: &'static str,
    /// Its MySQL error number.
    number: Option<u16>,
    /// How its message begins, where it is the runner's own.
    message_starts: Option<String>,
}

impl Refusal {
    /// Asserts `failed` is this refusal.
    #[track_caller]
    fn assert(&self, failed: &Failed) {
        assert_eq!(failed.outcome.code(), Some(self.code), "{failed:?}");
        let said = &failed.said;
        assert_eq!(said.sqlstate.as_deref(), Some(self.sqlstate), "{failed:?}");
        assert_eq!(said.number, self.number, "{failed:?}");
        if let Some(start) = &self.message_starts {
            assert!(said.message.starts_with(start), "{failed:?}");
        }
    }
}

/// The name of `key`'s named lock on MySQL.
pub fn lock_name(key: &(String, i64)) -> String {
    format!("txretry:{:016x}", KeyHash::of(key).to_u64())
}

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

/// The server's URL for `test`, or `None` to skip it.
fn url(test: &str) -> Option<String> {
    Db::BINARY
        .server
        .url(&format!("{} admission {test}", Db::BINARY.name))
}

/// The key a test's transactions contend on: `(name, n)`.
pub fn key(name: &str, n: i64) -> (String, i64) {
    (name.to_string(), n)
}
