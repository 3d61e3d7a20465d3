//! Admission across processes, on the database (`Admission::in_database`), written once for
//! every driver: two processes (see `txretry_testkit::intervals`) that must take turns on a
//! key. Each binary's `admission_db` module implements [`Driver`] (how it connects, makes a
//! process, runs the runner and a statement, and what the server says about a key's lock)
//! and keeps the scenarios only its driver has.

use std::future::Future;

use txretry::{Admission, RetryPolicy, TransientKind, TxOptions, Verdict};
use txretry_testkit::contended;
use txretry_testkit::intervals::{
    self, KEYS, Meet, Meeting, ROUNDS, WORKERS, assert_no_overlap, assert_overlap, policy, shared,
};

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

/// Two processes (`WORKERS` tasks × `ROUNDS` transactions on `KEYS` keys each) against a
/// new interval table named from `prefix`, dropped after; each transaction records when it
/// ran, inside the transaction (after its locks). With `barrier`, the first transaction of
/// worker 0 in each process waits for the other's inside the transaction, so the two
/// certainly overlap unless something keeps them apart. Returns how many pairs of
/// intervals on one key overlap.
async fn two_processes(
    url: &str,
    prefix: &str,
    admission: fn() -> Admission,
    barrier: bool,
) -> i64 {
    let table = &txretry_testkit::unique_name(&format!("{}_{prefix}", Db::BINARY.prefix));
    Db::exec(url, Db::BINARY.server.interval_table(table)).await;
    let meeting = Meeting::new(barrier);
    let mut tasks = tokio::task::JoinSet::new();
    let mut processes = Vec::new();
    for process_id in 0..intervals::PROCESSES {
        let process = Db::process(url, &format!("{table}_p{process_id}"), WORKERS as u32).await;
        // Each process its own policy, with its own Admission.
        let policy = policy(admission(), 100);
        for worker in 0..WORKERS {
            let mut on = Db::worker(&process).await;
            let (policy, table, meeting) = (policy.clone(), table.to_string(), meeting.clone());
            tasks.spawn(async move {
                for round in 0..ROUNDS {
                    let n = intervals::key_of(worker, round);
                    let options = TxOptions::new().contends_on(key(&table, n));
                    let meet = meeting.for_round(worker, round);
                    let (table, k, process) = (table.clone(), n, process_id);
                    let interval = Interval {
                        table,
                        k,
                        process,
                        meet,
                    };
                    Db::record(&mut on, &policy, &options, interval).await;
                }
            });
        }
        processes.push(process);
    }
    intervals::join_all(tasks).await;
    // Back in the pools, the sessions hold no lock; nor once the pools are closed.
    for n in 0..KEYS {
        assert_eq!(Db::key_holders(url, &key(table, n)).await, 0, "key {n}");
    }
    for process in processes {
        Db::close(process).await;
    }
    for n in 0..KEYS {
        assert_eq!(Db::key_holders(url, &key(table, n)).await, 0, "key {n}");
    }
    let rows = Db::query_i64(url, format!("SELECT count(*) FROM {table}")).await;
    intervals::assert_all_committed(rows);
    let overlaps = Db::query_i64(url, intervals::overlaps_sql(table)).await;
    Db::exec(url, format!("DROP TABLE IF EXISTS {table}")).await;
    overlaps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_never_run_one_key_at_once() {
    let Some(url) = Db::BINARY
        .server
        .url(&format!("{} admission never_overlap", Db::BINARY.name))
    else {
        return;
    };
    let overlaps = two_processes(&url, "shared", shared, false).await;
    assert_no_overlap(overlaps);
}

/// The check above can fail: with admission per process only, the two processes run the
/// same key at once (forced here, so it does not depend on timing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_database_two_processes_overlap() {
    let Some(url) = Db::BINARY
        .server
        .url(&format!("{} admission overlap", Db::BINARY.name))
    else {
        return;
    };
    let overlaps = two_processes(&url, "local", Admission::per_key, true).await;
    assert_overlap(overlaps);
}

/// `only_for_contended_keys`: a key's first transaction takes no lock on the database; a
/// real collision on it (see each driver's `held_per_attempt`) turns the locks on for the
/// retry and for the key's later transactions in this process, not for other keys, and not
/// in another process that saw no collision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contended_keys_are_locked_after_their_first_collision() {
    let Some(url) = Db::BINARY
        .server
        .url(&format!("{} admission contended keys", Db::BINARY.name))
    else {
        return;
    };
    let url = &url;
    let table = &txretry_testkit::unique_name(&format!("{}_cont", Db::BINARY.prefix));
    let options = Db::BINARY.server.table_options();
    Db::exec(
        url,
        format!("CREATE TABLE {table} (id int PRIMARY KEY, v bigint NOT NULL){options}"),
    )
    .await;
    Db::exec(url, format!("INSERT INTO {table} VALUES (1, 0), (2, 0)")).await;
    // Processes of this test's own: a first attempt's session setting stays in its session.
    let mut processes = Vec::new();
    for name in ["a", "b"] {
        let process = Db::process(url, &format!("{table}_{name}"), 2).await;
        let worker = Db::worker(&process).await;
        processes.push((process, worker, policy(contended::adaptive(), 5)));
    }
    for step in contended::STEPS {
        let (_, worker, policy) = &mut processes[step.process];
        let (id, collide) = (step.row, step.collide);
        let row = OnRow {
            url,
            table,
            id,
            collide,
        };
        let held = Db::held_per_attempt(worker, policy, row).await;
        assert_eq!(held, step.held, "{}", step.what);
    }
    for (id, after) in [(1, contended::ROW_1_AFTER), (2, contended::ROW_2_AFTER)] {
        let row = OnRow {
            url,
            table,
            id,
            collide: false,
        };
        let v = Db::query_i64(url, row.select()).await;
        assert_eq!(v, after, "row {id}");
    }
    for (process, _, _) in processes {
        Db::close(process).await;
    }
    Db::exec(url, format!("DROP TABLE IF EXISTS {table}")).await;
}
