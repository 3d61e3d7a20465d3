//! A fresh SQLite database file per test, and small helpers.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use txretry::{Backoff, Code, Phase, RetryPolicy, Verdict};

/// A database file in its own temporary directory, removed when the value is dropped.
pub struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Db {
    /// A new database in WAL mode.
    pub fn wal() -> Db {
        Db::with_journal("wal")
    }

    /// A new database in rollback-journal mode, where a reader holding SHARED blocks a
    /// writer's COMMIT.
    pub fn rollback_journal() -> Db {
        Db::with_journal("delete")
    }

    fn with_journal(mode: &str) -> Db {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("test.sqlite3");
        let db = Db { _dir: dir, path };
        let mut conn = db.open();
        conn.batch_execute(&format!("PRAGMA journal_mode = {mode}"))
            .expect("journal_mode");
        db
    }

    /// A new connection with `busy_timeout` 0: a lock held elsewhere fails at once with
    /// SQLITE_BUSY instead of waiting, so the tests see it.
    pub fn open(&self) -> SqliteConnection {
        let mut conn =
            SqliteConnection::establish(self.path.to_str().expect("UTF-8 path")).expect("open");
        conn.batch_execute("PRAGMA busy_timeout = 0; PRAGMA synchronous = NORMAL;")
            .expect("pragmas");
        conn
    }
}

/// The single integer a query returns.
pub fn scalar(conn: &mut SqliteConnection, query: &str) -> i64 {
    diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(&format!(
        "({query})"
    )))
    .get_result(conn)
    .expect(query)
}

/// The message of a Diesel database error (all SQLite leaves in it).
pub fn message(err: &diesel::result::Error) -> Option<&str> {
    match err {
        diesel::result::Error::DatabaseError(_, info) => Some(info.message()),
        _ => None,
    }
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

pub use txretry_testkit::outcome::assert_outcome;
