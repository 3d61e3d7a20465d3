//! SQLite scenarios written once for every blocking SQLite driver (rusqlite, Diesel), each
//! on a fresh database file per test: [`busy`] (a second writer gets SQLITE_BUSY, at BEGIN
//! or inside the closure, and the runner retries once the first writer commits) and
//! [`commit`] (failures at COMMIT: BUSY there is "not committed" and retried, a deferred
//! constraint is permanent; neither is ambiguous).
//!
//! A `#[path]` module `sqlite` of the `rusqlite` and `diesel-sqlite` binaries; each
//! implements [`Sqlite`] in its `common` module and runs the scenarios with
//! [`busy_tests!`] and [`commit_tests!`], which write the `#[test]` functions where they
//! are called.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use txretry::{Backoff, Code, Phase, RetryPolicy, TxError, TxOptions, Verdict};

pub mod busy;
pub mod commit;

/// A blocking SQLite driver, as the shared scenarios use it.
pub trait Sqlite: Sized + 'static {
    /// A connection.
    type Conn: Send + 'static;
    /// The driver's error.
    type Error: std::error::Error + Send + 'static;
    /// What the runner reports as the code of a deferred foreign key failing at COMMIT
    /// (the extended 787 where the driver keeps it, else the primary 19).
    const FOREIGN_KEY: Code;

    /// A new connection to the database at `path`, with `busy_timeout` 0 (a lock held
    /// elsewhere fails at once with SQLITE_BUSY instead of waiting, so the tests see it)
    /// and `synchronous = NORMAL` (durability is not under test).
    fn open(path: &Path) -> Self::Conn;
    /// Runs `sql` (one or more statements, no parameters) outside the runner.
    fn batch(conn: &mut Self::Conn, sql: &str) -> Result<(), Self::Error>;
    /// The single integer `sql` returns.
    fn scalar(conn: &mut Self::Conn, sql: &str) -> i64;
    /// The single text `sql` returns.
    fn text(conn: &mut Self::Conn, sql: &str) -> String;
    /// The driver's runner (`transaction`, or `transaction_with` when `options` are
    /// given): each attempt adds one to `calls`, runs `writes` in order (the first error
    /// ends the attempt) and returns the integer `read` returns, inside the transaction.
    fn transaction(
        conn: &mut Self::Conn,
        policy: &RetryPolicy,
        options: Option<&TxOptions>,
        calls: &mut u32,
        writes: &[&str],
        read: &str,
    ) -> Result<i64, TxError<Self::Error>>;
    /// Asserts that the driver counts no transaction open on `conn` (rusqlite: autocommit;
    /// Diesel: its own `transaction` begins one).
    fn assert_no_transaction(conn: &mut Self::Conn);
    /// Asserts that `err` is SQLITE_BUSY as the driver reports it, unchanged.
    fn assert_busy(err: &Self::Error);
    /// Asserts that `err` is a deferred foreign key failing at COMMIT, as the driver
    /// reports it.
    fn assert_foreign_key(err: &Self::Error);
}

/// A database file in its own temporary directory, removed (with its WAL files) when the
/// value is dropped. Each test has its own file, so tests running in parallel never see
/// each other's tables or locks.
pub struct Db<D> {
    _dir: tempfile::TempDir,
    path: PathBuf,
    driver: PhantomData<fn() -> D>,
}

impl<D: Sqlite> Db<D> {
    /// A new database in WAL mode.
    pub fn wal() -> Db<D> {
        Db::with_journal("wal")
    }

    /// A new database in rollback-journal mode (`journal_mode = DELETE`), where readers and
    /// a committing writer block each other.
    pub fn rollback_journal() -> Db<D> {
        Db::with_journal("delete")
    }

    fn with_journal(mode: &str) -> Db<D> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("test.sqlite3");
        let db = Db {
            _dir: dir,
            path,
            driver: PhantomData,
        };
        let mut conn = db.open();
        // journal_mode is a property of the file for WAL, so it sticks for every connection.
        D::batch(&mut conn, &format!("PRAGMA journal_mode = {mode}")).expect("journal_mode");
        assert_eq!(
            D::text(&mut conn, "SELECT journal_mode FROM pragma_journal_mode"),
            mode,
            "journal_mode"
        );
        db
    }

    /// A new connection (see [`Sqlite::open`]).
    pub fn open(&self) -> D::Conn {
        D::open(&self.path)
    }
}

/// Asserts that `conn` has no transaction open, as the driver sees it and as SQLite does
/// (a new `BEGIN` would fail inside one).
pub fn assert_idle<D: Sqlite>(conn: &mut D::Conn) {
    D::assert_no_transaction(conn);
    D::batch(conn, "BEGIN; ROLLBACK").expect("no transaction is open");
}

/// What a retry event said, for assertions: the failed attempt, the code, the verdict,
/// the phase.
pub type Seen = (u32, Option<Code>, Verdict, Phase);

/// A policy with `attempts` attempts and a 1 ms constant wait that records every retry
/// event, and runs `on_first` (once, in the retrying thread) before the first wait.
pub fn recording_policy(
    attempts: u32,
    on_first: impl Fn() + Send + Sync + 'static,
) -> (RetryPolicy, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let policy = RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Constant(Duration::from_millis(1)))
        .on_retry(move |event| {
            log.lock()
                .unwrap()
                .push((event.attempt, event.code, event.verdict, event.phase));
            if event.attempt == 1 {
                on_first();
            }
        })
        .build()
        .expect("valid policy");
    (policy, seen)
}

/// The events recorded so far.
pub fn events(seen: &Mutex<Vec<Seen>>) -> Vec<Seen> {
    seen.lock().unwrap().clone()
}

/// The `#[test]` functions of [`busy`] for driver `$d`, where it is called.
macro_rules! busy_tests {
    ($d:ty) => {
        #[test]
        fn a_second_writer_gets_busy_and_it_classifies_as_busy() {
            crate::sqlite::busy::a_second_writer_gets_busy::<$d>();
        }

        /// The runner begins IMMEDIATE (the default): BEGIN itself fails with BUSY.
        #[test]
        fn the_runner_retries_busy_at_begin_until_the_other_writer_commits() {
            crate::sqlite::busy::retried_at_begin::<$d>();
        }

        /// The runner begins DEFERRED: the first write inside the closure fails with BUSY.
        #[test]
        fn the_runner_retries_busy_inside_the_closure() {
            crate::sqlite::busy::retried_inside_the_closure::<$d>();
        }

        #[test]
        fn without_retries_the_busy_error_comes_back_unchanged() {
            crate::sqlite::busy::without_retries::<$d>();
        }
    };
}

/// The `#[test]` functions of [`commit`] for driver `$d`, where it is called.
macro_rules! commit_tests {
    ($d:ty) => {
        #[test]
        fn busy_at_commit_is_rolled_back_and_retried() {
            crate::sqlite::commit::busy_at_commit::<$d>();
        }

        #[test]
        fn a_deferred_constraint_failing_at_commit_is_permanent_and_rolled_back() {
            crate::sqlite::commit::deferred_constraint_at_commit::<$d>();
        }
    };
}

pub(crate) use {busy_tests, commit_tests};
