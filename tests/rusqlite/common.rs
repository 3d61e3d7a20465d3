//! A fresh SQLite database file per test, and small helpers.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::Connection;
use txretry::{Backoff, Code, RetryPolicy, Verdict};

/// A database file in its own temporary directory, removed (with its WAL files) when the
/// value is dropped. Each test has its own file, so tests running in parallel never see
/// each other's tables or locks.
pub struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Db {
    /// A new database in WAL mode.
    pub fn wal() -> Db {
        Db::with_journal("wal")
    }

    /// A new database in rollback-journal mode (`journal_mode = DELETE`), where readers and
    /// a committing writer block each other.
    pub fn rollback_journal() -> Db {
        Db::with_journal("delete")
    }

    fn with_journal(mode: &str) -> Db {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("test.sqlite3");
        let db = Db { _dir: dir, path };
        let conn = db.open();
        // journal_mode is a property of the file for WAL, so it sticks for every connection.
        let got: String = conn
            .pragma_update_and_check(None, "journal_mode", mode, |row| row.get(0))
            .expect("set journal_mode");
        assert_eq!(got, mode, "journal_mode");
        db
    }

    /// A new connection with `busy_timeout` 0 (rusqlite's default is 5 s): a lock held
    /// elsewhere fails at once with SQLITE_BUSY instead of waiting, so the tests see it.
    pub fn open(&self) -> Connection {
        let conn = Connection::open(&self.path).expect("open database");
        // Commits without fsync; WAL stays consistent (durability is not under test).
        // Set while rusqlite's default busy timeout still applies: the pragma reads the
        // schema, and a connection opened while another one rebuilds the WAL index would
        // otherwise fail here with SQLITE_BUSY_RECOVERY (261).
        conn.pragma_update(None, "synchronous", "NORMAL")
            .expect("synchronous");
        conn.busy_timeout(Duration::ZERO).expect("busy_timeout");
        conn
    }
}

/// The SQLite extended result code of a rusqlite error, if it has one.
pub fn sqlite_code(err: &rusqlite::Error) -> Option<i32> {
    err.sqlite_error().map(|e| e.extended_code)
}

/// What a retry event said, for assertions: the failed attempt, the code, the verdict.
pub type Seen = (u32, Option<Code>, Verdict);

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
                .push((event.attempt, event.code, event.verdict));
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

pub use txretry_testkit::outcome::assert_outcome;
