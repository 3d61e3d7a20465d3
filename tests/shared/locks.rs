//! Two sessions and a row lock, written once for every driver on Postgres and
//! MySQL/MariaDB: the runner's transaction (A) against another session's (B, outside the
//! runner).
//!
//! - [`deadlock`]: A and B update rows 1 and 2 in opposite order. A is made the victim
//!   (Postgres: A detects deadlocks after 100 ms, B after 10 s; InnoDB rolls back the
//!   lighter transaction, and B changes rows 3..=20 first): 40P01 / 1213. The runner rolls
//!   A back and runs it again once B committed; each session's update lands once.
//! - [`lock_timeout`]: B holds row 1; A inserts a row, then waits for row 1 at most 100 ms
//!   (`lock_timeout`: 55P03) or 1 s (`innodb_lock_wait_timeout`: 1205, which rolls back
//!   only the statement and leaves A's insert in its open transaction). B commits; the
//!   runner rolls A back and runs it again; A's insert and update land once.
//!
//! Each checks what the closure saw (the error as the driver keeps it, and
//! `txretry::classify` of it), what the runner retried (the classification, the attempt,
//! the verdict, the phase), the attempts and the rows. Each binary's `contention` module
//! calls both on its [`Bank`], which also implements [`Sessions`] (in the same files as
//! the `Bank`, or `tests/sea-orm-shared/sessions.rs`); the driver's transaction type
//! implements [`Tx`], for [`Script::run`].

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use txretry::{Classification, Code, Phase, RetryPolicy, SqlState, TransientKind, Verdict};
use txretry_testkit::record::recording;
use txretry_testkit::wait::within;

use crate::transfers::{Bank, Dialect};

/// A failed statement of the runner's transaction, as the closure saw it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The SQLSTATE the driver kept, if any.
    pub sqlstate: Option<String>,
    /// The MySQL error number the driver kept, if any.
    pub errno: Option<u16>,
    /// The server's message.
    pub message: String,
    /// `txretry::classify` of the error.
    pub classified: Classification,
    /// What [`Script::after_failure`] selected, still in the transaction.
    pub in_tx: Option<i64>,
}

/// Where the runner's transaction is: before statement `index` of attempt `attempt` (from
/// 1), or after a statement failed.
pub enum Event {
    Before {
        attempt: u32,
        index: usize,
    },
    Failed {
        attempt: u32,
        index: usize,
        failure: Failure,
    },
}

type Hook = Box<dyn Fn(Event) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// What the runner's transaction runs on each attempt ([`Script::run`]).
pub struct Script {
    statements: Vec<String>,
    /// After a statement failed, still in the transaction: selects one integer, as `v`.
    after_failure: Option<String>,
    attempts: AtomicU32,
    hook: Hook,
}

/// The runner's transaction, as [`Script::run`] uses it (a driver's transaction type, or
/// its connection while the runner holds a transaction open on it).
pub trait Tx: Send {
    type Error;
    /// Runs one statement.
    fn exec(&mut self, sql: &str) -> impl Future<Output = Result<(), Self::Error>> + Send;
    /// The one integer `sql` selects (as column `v`).
    fn one(&mut self, sql: &str) -> impl Future<Output = Result<i64, Self::Error>> + Send;
    /// What the closure saw of `err` (`txretry::classify` of it, and what the driver kept).
    fn failure(err: &Self::Error, in_tx: Option<i64>) -> Failure;
}

impl Script {
    fn new(statements: Vec<String>, after_failure: Option<String>, hook: Hook) -> Arc<Script> {
        Arc::new(Script {
            statements,
            after_failure,
            attempts: AtomicU32::new(0),
            hook,
        })
    }

    /// One attempt, the body of a driver's runner closure: the hook before each statement;
    /// if one fails, what `after_failure` selects in the same transaction, the hook with
    /// what the closure saw, and the error.
    pub async fn run<T: Tx>(&self, tx: &mut T) -> Result<(), T::Error> {
        let attempt = 1 + self.attempts.fetch_add(1, Ordering::SeqCst);
        for (index, sql) in self.statements.iter().enumerate() {
            (self.hook)(Event::Before { attempt, index }).await;
            if let Err(err) = tx.exec(sql).await {
                let in_tx = match &self.after_failure {
                    Some(sql) => Some(tx.one(sql).await?),
                    None => None,
                };
                let failure = T::failure(&err, in_tx);
                (self.hook)(Event::Failed {
                    attempt,
                    index,
                    failure,
                })
                .await;
                return Err(err);
            }
        }
        Ok(())
    }

    /// The attempts begun.
    fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }
}

/// What the scenarios need of a driver beyond its [`Bank`].
pub trait Sessions: Bank {
    /// Whether the driver keeps a MySQL error's number (Diesel keeps only the SQLSTATE).
    const KEEPS_ERRNO: bool;
    /// A transaction begun outside the runner, on a session of its own.
    type Held: Send + 'static;

    /// Begins a transaction on a new session.
    fn begin(&self) -> impl Future<Output = Self::Held> + Send;
    /// Runs one statement in `held`.
    fn held_exec(
        held: &mut Self::Held,
        sql: String,
    ) -> impl Future<Output = Result<(), String>> + Send;
    /// The one integer `sql` selects (as column `v`) in `held`.
    fn held_i64(held: &mut Self::Held, sql: String) -> impl Future<Output = i64> + Send;
    /// Commits `held` and closes (or releases) its session.
    fn commit(held: Self::Held) -> impl Future<Output = Result<(), String>> + Send;
    /// `script` through the runner under `policy` (default options), on `worker`.
    fn script(
        worker: &mut Self::Worker,
        policy: &RetryPolicy,
        script: Arc<Script>,
    ) -> impl Future<Output = Result<(), String>> + Send;
}

/// Selects 1 once session `id` waits for a row lock in `statement`: on Postgres, as
/// `pg_stat_activity` says; on MySQL, once the process list shows it running `statement`
/// (InnoDB refreshes `information_schema.innodb_trx` only when nobody read it for 100 ms,
/// so polling that never sees a change), which can then only wait.
fn waits_for_lock(dialect: Dialect, id: i64, statement: &str) -> String {
    match dialect {
        Dialect::Postgres => format!(
            "SELECT count(*) AS v FROM pg_stat_activity
             WHERE pid = {id} AND wait_event_type = 'Lock'"
        ),
        Dialect::MySql => format!(
            "SELECT count(*) AS v FROM information_schema.processlist
             WHERE id = {id} AND info = '{statement}'"
        ),
        Dialect::Sqlite => unreachable!("one session at a time"),
    }
}

/// The session's id, as the server numbers its connections.
fn session_id(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Postgres => "SELECT CAST(pg_backend_pid() AS bigint) AS v",
        _ => "SELECT CAST(CONNECTION_ID() AS SIGNED) AS v",
    }
}

/// `CREATE TABLE {t} (id, v)` with rows `1..=rows`, v = 0.
async fn create_rows<B: Bank>(bank: &B, t: &str, rows: i64) {
    let engine = engine(B::DIALECT);
    bank.exec(format!(
        "CREATE TABLE {t} (id BIGINT PRIMARY KEY, v BIGINT NOT NULL){engine}"
    ))
    .await;
    let values: Vec<String> = (1..=rows).map(|id| format!("({id}, 0)")).collect();
    bank.exec(format!("INSERT INTO {t} VALUES {}", values.join(", ")))
        .await;
}

fn engine(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::MySql => " ENGINE=InnoDB",
        _ => "",
    }
}

/// The one failure a scenario provokes, as each database reports it.
struct Expected {
    kind: TransientKind,
    /// Postgres's SQLSTATE.
    sqlstate: &'static str,
    /// MySQL's error number, SQLSTATE and the start of its message.
    errno: u16,
    mysql_sqlstate: &'static str,
    mysql_message: &'static str,
}

const DEADLOCK: Expected = Expected {
    kind: TransientKind::Deadlock,
    sqlstate: "40P01",
    errno: 1213,
    // The errno decides, not the SQLSTATE (40001 would read as a serialization failure).
    mysql_sqlstate: "40001",
    mysql_message: "Deadlock found when trying to get lock",
};

const LOCK_TIMEOUT: Expected = Expected {
    kind: TransientKind::LockTimeout,
    sqlstate: "55P03",
    errno: 1205,
    // MySQL's catch-all: only the errno (or the message) says what happened.
    mysql_sqlstate: "HY000",
    mysql_message: "Lock wait timeout exceeded",
};

/// The failures the hook recorded, with their attempt and statement.
type Failures = Arc<Mutex<Vec<(u32, usize, Failure)>>>;

/// Runs `script` through the runner on a worker of `bank` (three attempts at most) and
/// asserts that it committed at the second, and what the closure and the runner saw: one
/// failure, at statement `index` of the first attempt, as `expected` says (the SQLSTATE
/// and the message the driver kept, the errno if it keeps one, `txretry::classify`),
/// retried once, judged the same, from the body.
async fn run_twice<B: Sessions>(
    bank: &B,
    script: Arc<Script>,
    failures: &Failures,
    index: usize,
    expected: &Expected,
) -> Failure {
    let (policy, seen) = recording(3);
    let policy = policy.build().unwrap();
    let mut a = bank.worker().await;
    within(B::script(&mut a, &policy, script.clone()))
        .await
        .expect("the retry commits");
    assert_eq!(script.attempts(), 2);

    let failures = failures.lock().unwrap().clone();
    assert_eq!(failures.len(), 1, "{failures:?}");
    let (attempt, at, failure) = failures[0].clone();
    assert_eq!((attempt, at), (1, index), "{failure:?}");
    let code = match B::DIALECT {
        Dialect::MySql => {
            assert_eq!(
                failure.sqlstate.as_deref(),
                Some(expected.mysql_sqlstate),
                "{failure:?}"
            );
            let errno = B::KEEPS_ERRNO.then_some(expected.errno);
            assert_eq!(failure.errno, errno, "{failure:?}");
            assert!(
                failure.message.starts_with(expected.mysql_message),
                "{failure:?}"
            );
            Code::MySql(expected.errno)
        }
        _ => {
            assert_eq!(
                failure.sqlstate.as_deref(),
                Some(expected.sqlstate),
                "{failure:?}"
            );
            assert_eq!(failure.errno, None, "{failure:?}");
            Code::SqlState(SqlState::new(expected.sqlstate).unwrap())
        }
    };
    let verdict = Verdict::Transient(expected.kind);
    assert_eq!(failure.classified.verdict, verdict, "{failure:?}");
    assert_eq!(failure.classified.code, Some(code), "{failure:?}");
    // The runner retried that error, once.
    assert_eq!(seen.all(), vec![(1, failure.classified)]);
    let judged = seen.judged();
    assert_eq!(judged.len(), 1, "{judged:?}");
    assert_eq!(judged[0].verdict, verdict);
    assert_eq!(judged[0].code, Some(code));
    assert_eq!(judged[0].phase, Phase::Body);
    failure
}

/// The deadlock scenario (see the module's doc) on `bank`.
pub async fn deadlock<B: Sessions>(bank: B) {
    let dialect = B::DIALECT;
    let bank = Arc::new(bank);
    let t = txretry_testkit::unique_name("deadlock");
    // On InnoDB, B changes rows 3..=20 first, so that A is the lighter transaction.
    let rows = match dialect {
        Dialect::MySql => 20,
        _ => 2,
    };
    create_rows(&*bank, &t, rows).await;
    let update = |add: i64, id: &str| format!("UPDATE {t} SET v = v + {add} WHERE id {id}");

    // B: takes row 2 (after rows 3..=20 on InnoDB), then waits for row 1; commits once A
    // was rolled back.
    let mut b = bank.begin().await;
    let mut b_statements = Vec::new();
    match dialect {
        Dialect::Postgres => {
            B::held_exec(&mut b, "SET LOCAL deadlock_timeout = '10s'".into())
                .await
                .unwrap();
        }
        _ => b_statements.push(update(10, ">= 3")),
    }
    let b_waits = update(10, "= 1");
    b_statements.extend([update(10, "= 2"), b_waits.clone()]);
    let b_id = B::held_i64(&mut b, session_id(dialect).into()).await;
    let (go, b_go) = tokio::sync::oneshot::channel::<()>();
    let session_b: JoinHandle<Result<(), String>> = tokio::spawn(async move {
        b_go.await.unwrap();
        for statement in b_statements {
            B::held_exec(&mut b, statement).await?;
        }
        B::commit(b).await
    });

    // A: row 1, then row 2. On Postgres, it checks for deadlocks after 100 ms.
    let mut statements = Vec::new();
    if let Dialect::Postgres = dialect {
        statements.push("SET LOCAL deadlock_timeout = '100ms'".to_owned());
    }
    statements.extend([update(1, "= 1"), update(1, "= 2")]);
    let closes_the_cycle = statements.len() - 1;

    let failures = Failures::default();
    let go = Arc::new(Mutex::new(Some(go)));
    let session_b = Arc::new(tokio::sync::Mutex::new(Some(session_b)));
    let b_committed = Arc::new(Mutex::new(None));
    let waits = waits_for_lock(dialect, b_id, &b_waits);
    let hook: Hook = Box::new({
        let (bank, failures, b_committed) = (bank.clone(), failures.clone(), b_committed.clone());
        move |event| {
            let (bank, failures, go) = (bank.clone(), failures.clone(), go.clone());
            let waits = waits.clone();
            let (session_b, b_committed) = (session_b.clone(), b_committed.clone());
            Box::pin(async move {
                match event {
                    // A holds row 1: B goes, takes row 2 and waits for row 1, so that A's
                    // update of row 2 closes the cycle.
                    Event::Before { attempt: 1, index } if index == closes_the_cycle => {
                        let go = go.lock().unwrap().take().expect("once");
                        go.send(()).unwrap();
                        within(async {
                            while bank.query_i64(waits.clone()).await != 1 {
                                tokio::time::sleep(Duration::from_millis(10)).await;
                            }
                        })
                        .await;
                    }
                    // The retry starts once B committed: else it could take row 1 back
                    // before B woke from its lock wait, and deadlock with it again.
                    Event::Before {
                        attempt: 2..,
                        index: 0,
                    } => {
                        if let Some(b) = session_b.lock().await.take() {
                            *b_committed.lock().unwrap() = Some(b.await.unwrap());
                        }
                    }
                    Event::Before { .. } => {}
                    Event::Failed {
                        attempt,
                        index,
                        failure,
                    } => {
                        failures.lock().unwrap().push((attempt, index, failure));
                    }
                }
            })
        }
    });
    let script = Script::new(statements, None, hook);

    run_twice(&*bank, script, &failures, closes_the_cycle, &DEADLOCK).await;
    let b_committed = b_committed.lock().unwrap().clone();
    let b_committed = b_committed.expect("the retry waited for B");
    assert_eq!(b_committed, Ok(()), "B commits once A was rolled back");

    // A's first attempt left nothing behind: each session added exactly once.
    let v = |id: i64| bank.query_i64(format!("SELECT v AS v FROM {t} WHERE id = {id}"));
    assert_eq!((v(1).await, v(2).await), (11, 11));
    if let Dialect::MySql = dialect {
        let sum = format!("SELECT CAST(sum(v) AS SIGNED) AS v FROM {t} WHERE id >= 3");
        assert_eq!(bank.query_i64(sum).await, 10 * (rows - 2));
    }
    bank.exec(format!("DROP TABLE {t}")).await;
}

/// The lock-timeout scenario (see the module's doc) on `bank`.
pub async fn lock_timeout<B: Sessions>(bank: B) {
    let dialect = B::DIALECT;
    let bank = Arc::new(bank);
    let t = txretry_testkit::unique_name("lock_timeout");
    let log = txretry_testkit::unique_name("lock_timeout_log");
    create_rows(&*bank, &t, 1).await;
    // No key: a second copy of the row would be stored, not refused.
    let engine = engine(dialect);
    bank.exec(format!(
        "CREATE TABLE {log} (note VARCHAR(20) NOT NULL){engine}"
    ))
    .await;

    // B holds row 1 until A's first attempt timed out.
    let mut b = bank.begin().await;
    B::held_exec(&mut b, format!("UPDATE {t} SET v = v + 10 WHERE id = 1"))
        .await
        .unwrap();
    let holder = Arc::new(tokio::sync::Mutex::new(Some(b)));

    let (timeout, after_failure) = match dialect {
        Dialect::Postgres => ("SET LOCAL lock_timeout = '100ms'", None),
        // Session-level (the statement rolls back alone): set on every attempt.
        _ => (
            "SET SESSION innodb_lock_wait_timeout = 1",
            Some(format!("SELECT count(*) AS v FROM {log}")),
        ),
    };
    let statements = vec![
        timeout.to_owned(),
        format!("INSERT INTO {log} (note) VALUES ('once')"),
        format!("UPDATE {t} SET v = v + 1 WHERE id = 1"),
    ];
    let times_out = statements.len() - 1;

    let failures = Failures::default();
    let hook: Hook = Box::new({
        let failures = failures.clone();
        move |event| {
            let (failures, holder) = (failures.clone(), holder.clone());
            Box::pin(async move {
                if let Event::Failed {
                    attempt,
                    index,
                    failure,
                } = event
                {
                    failures.lock().unwrap().push((attempt, index, failure));
                    // B commits before the runner retries.
                    if let Some(b) = holder.lock().await.take() {
                        B::commit(b).await.unwrap();
                    }
                }
            })
        }
    });
    let script = Script::new(statements, after_failure, hook);

    let failure = run_twice(&*bank, script, &failures, times_out, &LOCK_TIMEOUT).await;
    if let Dialect::MySql = dialect {
        // Only the statement was rolled back: the runner's ROLLBACK keeps the insert from
        // landing twice.
        assert_eq!(
            failure.in_tx,
            Some(1),
            "the transaction stayed open after 1205"
        );
    }

    let count = format!("SELECT count(*) AS v FROM {log}");
    assert_eq!(bank.query_i64(count).await, 1, "the insert landed once");
    let v = format!("SELECT v AS v FROM {t} WHERE id = 1");
    assert_eq!(bank.query_i64(v).await, 11, "B's update, then A's, once");
    bank.exec(format!("DROP TABLE {t}")).await;
    bank.exec(format!("DROP TABLE {log}")).await;
}
