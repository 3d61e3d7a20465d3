//! Contention, written once for every (driver, database) pair: [`TASKS`] workers ×
//! [`TRANSFERS`] transfers between [`ACCOUNTS`] hot accounts, each worker on a session of
//! its own, every transfer through the driver's runner. A transfer reads the source's
//! balance, writes back what it computed from it (a lost update would show in the sum),
//! credits the destination and writes one ledger row keyed `(task, seq)`; transfers take
//! their two rows in either order, so they also deadlock. A reader checks the sum in
//! read-only transactions while the transfers run.
//!
//! At the end: the sum never changed, there is one ledger row per transfer, every balance
//! is what its ledger rows say (each transfer applied exactly once), and every retry was of
//! a kind the run expects. Each binary's `contention` module implements [`Bank`] and names
//! its runs ([`Run`]: isolation or begin mode, the kinds expected).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use txretry::{Isolation, RetryPolicy, SqliteBegin, TransientKind, TxOptions, Verdict};
use txretry_testkit::record::{Seen, jittered};
use txretry_testkit::wait::within;

pub const TASKS: i64 = 16;
pub const TRANSFERS: i64 = 50;
pub const ACCOUNTS: i64 = 4;
pub const START: i64 = 1000;
/// Each transaction's attempts.
const ATTEMPTS: u32 = 1000;

/// Where the SQL of the scenario differs.
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // each binary names one or two of them
pub enum Dialect {
    Postgres,
    MySql,
    Sqlite,
}

impl Dialect {
    /// The `n`th (from 1) bind parameter.
    fn param(self, n: usize) -> String {
        match self {
            Dialect::Postgres => format!("${n}"),
            Dialect::MySql | Dialect::Sqlite => "?".to_string(),
        }
    }

    /// `expr` as a 64-bit integer (a `sum` is `numeric` on Postgres, `DECIMAL` on MySQL).
    fn as_i64(self, expr: &str) -> String {
        match self {
            Dialect::Postgres => format!("({expr})::bigint"),
            Dialect::MySql => format!("CAST({expr} AS SIGNED)"),
            Dialect::Sqlite => expr.to_string(),
        }
    }
}

/// The statements of one run, on its two tables.
pub struct Sql {
    /// Runs first in each transfer, if any.
    pub prelude: Option<&'static str>,
    /// The source's balance, as column `v`; binds `src`.
    pub balance: String,
    /// Sets the source's balance; binds the new balance, `src`.
    pub debit: String,
    /// Credits the destination; binds `amount`, `dst`.
    pub credit: String,
    /// The ledger row; binds `task`, `seq`, `src`, `dst`, `amount`.
    pub record: String,
    /// The sum of balances, as a 64-bit integer in column `v`.
    pub sum: String,
}

impl Sql {
    fn new(dialect: Dialect, prelude: Option<&'static str>, tables: &Tables) -> Self {
        let (accounts, ledger) = (&tables.accounts, &tables.ledger);
        let p = |n| dialect.param(n);
        // InnoDB's plain reads are snapshots: read-then-write needs a locking read there.
        let lock = match dialect {
            Dialect::MySql => " FOR UPDATE",
            Dialect::Postgres | Dialect::Sqlite => "",
        };
        Sql {
            prelude,
            balance: format!(
                "SELECT balance AS v FROM {accounts} WHERE id = {}{lock}",
                p(1)
            ),
            debit: format!(
                "UPDATE {accounts} SET balance = {} WHERE id = {}",
                p(1),
                p(2)
            ),
            credit: format!(
                "UPDATE {accounts} SET balance = balance + {} WHERE id = {}",
                p(1),
                p(2)
            ),
            record: format!(
                "INSERT INTO {ledger} (task, seq, src, dst, amount) VALUES ({}, {}, {}, {}, {})",
                p(1),
                p(2),
                p(3),
                p(4),
                p(5)
            ),
            sum: format!(
                "SELECT {} AS v FROM {accounts}",
                dialect.as_i64("sum(balance)")
            ),
        }
    }
}

/// The run's two tables.
struct Tables {
    accounts: String,
    ledger: String,
}

/// One transfer: the `seq`th of worker `task`.
pub struct Transfer {
    pub task: i64,
    pub seq: i64,
    pub src: i64,
    pub dst: i64,
    pub amount: i64,
}

impl Transfer {
    fn nth(task: i64, seq: i64) -> Self {
        let src = (task + seq) % ACCOUNTS;
        Transfer {
            task,
            seq,
            src,
            dst: (src + 1 + seq % 3) % ACCOUNTS,
            amount: 1 + (task * 7 + seq) % 13,
        }
    }
}

/// What differs between the drivers, for the scenario.
pub trait Bank: Send + Sync + 'static {
    const DIALECT: Dialect;
    /// What one worker runs its transactions on: a clone of a pool, or a session of its
    /// own.
    type Worker: Send + 'static;

    /// A new worker.
    fn worker(&self) -> impl Future<Output = Self::Worker> + Send;
    /// Runs `sql` (one or more statements) outside the runner.
    fn exec(&self, sql: String) -> impl Future<Output = ()> + Send;
    /// The one integer `sql` selects (its column is named `v`), outside the runner.
    fn query_i64(&self, sql: String) -> impl Future<Output = i64> + Send;
    /// One transfer through the runner under `policy` and `options`: `sql.prelude`, then
    /// `sql.balance`, `sql.debit` (with the balance read less the amount), `sql.credit`,
    /// `sql.record`. Counts each run of its body in `runs`.
    fn transfer(
        worker: &mut Self::Worker,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: Arc<Sql>,
        transfer: Transfer,
        runs: Arc<AtomicU32>,
    ) -> impl Future<Output = Result<(), String>> + Send;
    /// `sql` (one integer) in a transaction through the runner, under `options`.
    fn read(
        worker: &mut Self::Worker,
        policy: &RetryPolicy,
        options: &TxOptions,
        sql: String,
    ) -> impl Future<Output = Result<i64, String>> + Send;
}

/// One run of the scenario.
pub struct Run {
    /// What the summary line calls it.
    pub name: &'static str,
    /// The transfers' options.
    pub options: TxOptions,
    /// The reader's options (read-only).
    pub reader: TxOptions,
    /// A statement each transfer runs first.
    pub prelude: Option<&'static str>,
    /// The kinds of failure the runner may retry in this run.
    pub retried: &'static [TransientKind],
}

#[allow(dead_code)] // each binary runs the ones of its database
impl Run {
    /// Postgres under SERIALIZABLE: serialization failures, and deadlocks (transfers take
    /// their two rows in either order), detected after 20 ms rather than the default 1 s;
    /// the reader in a read-only REPEATABLE READ snapshot.
    pub fn postgres_serializable(name: &'static str) -> Run {
        Run {
            name,
            options: TxOptions::new().isolation(Isolation::Serializable),
            reader: TxOptions::new()
                .isolation(Isolation::RepeatableRead)
                .read_only(true),
            prelude: Some("SET LOCAL deadlock_timeout = '20ms'"),
            retried: &[TransientKind::SerializationFailure, TransientKind::Deadlock],
        }
    }

    /// MySQL/MariaDB at the server's default isolation (REPEATABLE READ; the transfers
    /// read with `FOR UPDATE`): deadlocks (1213).
    pub fn mysql_default(name: &'static str) -> Run {
        Run {
            name,
            options: TxOptions::new(),
            reader: TxOptions::new().read_only(true),
            prelude: None,
            retried: &[TransientKind::Deadlock],
        }
    }

    /// SQLite, the transfers begun `begin`: `SQLITE_BUSY` (and `BUSY_SNAPSHOT`); the reader
    /// read-only, DEFERRED.
    pub fn sqlite(name: &'static str, begin: SqliteBegin) -> Run {
        Run {
            name,
            options: TxOptions::new().sqlite_begin(begin),
            reader: TxOptions::new()
                .sqlite_begin(SqliteBegin::Deferred)
                .read_only(true),
            prelude: None,
            retried: &[TransientKind::Busy],
        }
    }
}

/// For a blocking driver's [`Bank`]: runs `f` on the worker's connection on one of
/// tokio's blocking threads, and puts the connection back.
#[allow(dead_code)] // the blocking drivers' binaries use it
pub async fn on_blocking_thread<C: Send + 'static, T: Send + 'static>(
    worker: &mut Option<C>,
    f: impl FnOnce(&mut C) -> T + Send + 'static,
) -> T {
    let mut conn = worker.take().expect("the worker's connection");
    let (conn, result) = tokio::task::spawn_blocking(move || {
        let result = f(&mut conn);
        (conn, result)
    })
    .await
    .unwrap();
    *worker = Some(conn);
    result
}

/// Runs the scenario on `bank` and checks it.
pub async fn transfers<B: Bank>(bank: B, run: Run) {
    let dialect = B::DIALECT;
    let bank = Arc::new(bank);
    let tables = Tables {
        accounts: txretry_testkit::unique_name("accounts"),
        ledger: txretry_testkit::unique_name("ledger"),
    };
    let (accounts, ledger) = (&tables.accounts, &tables.ledger);
    let engine = match dialect {
        Dialect::MySql => " ENGINE=InnoDB",
        Dialect::Postgres | Dialect::Sqlite => "",
    };
    bank.exec(format!(
        "CREATE TABLE {accounts} (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL){engine}"
    ))
    .await;
    let opening: Vec<String> = (0..ACCOUNTS).map(|id| format!("({id}, {START})")).collect();
    bank.exec(format!(
        "INSERT INTO {accounts} VALUES {}",
        opening.join(", ")
    ))
    .await;
    bank.exec(format!(
        "CREATE TABLE {ledger} (task BIGINT NOT NULL, seq BIGINT NOT NULL, src BIGINT NOT NULL,
         dst BIGINT NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (task, seq)){engine}"
    ))
    .await;
    let sql = Arc::new(Sql::new(dialect, run.prelude, &tables));

    // A budget no run comes near (a long run of failures is contention, not a fault: the
    // test is about each transfer committing once, whatever it took).
    let seen = Seen::default();
    let policy = jittered(ATTEMPTS, Duration::from_millis(20), &seen);
    let runs = Arc::new(AtomicU32::new(0));

    // A reader checks the invariant while the writers run, under the same budget (its
    // retries not recorded).
    let done = Arc::new(AtomicBool::new(false));
    let reader = tokio::spawn({
        let mut worker = bank.worker().await;
        let (done, sql, options) = (done.clone(), sql.clone(), run.reader.clone());
        let policy = jittered(ATTEMPTS, Duration::from_millis(20), &Seen::default());
        async move {
            let mut checks = 0;
            while !done.load(Ordering::SeqCst) {
                let sum = B::read(&mut worker, &policy, &options, sql.sum.clone()).await;
                assert_eq!(sum, Ok(ACCOUNTS * START), "the sum changed mid-run");
                checks += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            checks
        }
    });

    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let mut worker = bank.worker().await;
        let (policy, options) = (policy.clone(), run.options.clone());
        let (sql, runs) = (sql.clone(), runs.clone());
        tasks.spawn(async move {
            for seq in 0..TRANSFERS {
                let transfer = Transfer::nth(task, seq);
                let done = B::transfer(
                    &mut worker,
                    &policy,
                    &options,
                    sql.clone(),
                    transfer,
                    runs.clone(),
                );
                if let Err(err) = done.await {
                    panic!("transfer {task}/{seq} failed: {err}");
                }
            }
        });
    }
    within(async {
        while let Some(joined) = tasks.join_next().await {
            joined.unwrap();
        }
    })
    .await;
    done.store(true, Ordering::SeqCst);
    let checks = within(reader).await.unwrap();

    assert_eq!(bank.query_i64(sql.sum.clone()).await, ACCOUNTS * START);
    let rows = bank
        .query_i64(format!(
            "SELECT {} AS v FROM {ledger}",
            dialect.as_i64("count(*)")
        ))
        .await;
    assert_eq!(rows, TASKS * TRANSFERS, "one ledger row per transfer");
    let mismatched = bank
        .query_i64(format!(
            "SELECT {} AS v FROM {accounts} a WHERE a.balance != {START}
               - (SELECT coalesce(sum(amount), 0) FROM {ledger} WHERE src = a.id)
               + (SELECT coalesce(sum(amount), 0) FROM {ledger} WHERE dst = a.id)",
            dialect.as_i64("count(*)")
        ))
        .await;
    assert_eq!(mismatched, 0, "every balance is what its ledger rows say");
    let seen = seen.all();
    for (_, classified) in &seen {
        let retried = run
            .retried
            .iter()
            .any(|&kind| classified.verdict == Verdict::Transient(kind));
        assert!(retried, "{} retried {classified:?}", run.name);
    }
    eprintln!(
        "{}: {} transfers, {} runs of the body, {} retries (longest run of failures: {}), \
         {checks} checks of the sum",
        run.name,
        TASKS * TRANSFERS,
        runs.load(Ordering::Relaxed),
        seen.len(),
        seen.iter().map(|(attempt, _)| *attempt).max().unwrap_or(0),
    );
    bank.exec(format!("DROP TABLE {accounts}")).await;
    bank.exec(format!("DROP TABLE {ledger}")).await;
}
