//! A fresh SQLite database file per test, and small helpers.

use std::path::Path;
use std::time::Duration;

use rusqlite::Connection;
use txretry::{
    AsError, Backoff, Code, Phase, RetryPolicy, StopReason, TxError, TxOptions, Verdict,
};

use crate::sqlite::Sqlite;

/// A database file of its own per test (`tests/shared/sqlite/`), opened with rusqlite.
pub type Db = crate::sqlite::Db<Rusqlite>;

/// rusqlite for the shared SQLite scenarios (`tests/shared/sqlite/`).
pub struct Rusqlite;

impl Sqlite for Rusqlite {
    type Conn = Connection;
    type Error = rusqlite::Error;
    /// SQLITE_CONSTRAINT_FOREIGNKEY: rusqlite keeps the extended code.
    const FOREIGN_KEY: Code = Code::Sqlite(787);

    /// `busy_timeout` 0 (rusqlite's default is 5 s).
    fn open(path: &Path) -> Connection {
        let conn = Connection::open(path).expect("open database");
        // Set while rusqlite's default busy timeout still applies: the pragma reads the
        // schema, and a connection opened while another one rebuilds the WAL index would
        // otherwise fail here with SQLITE_BUSY_RECOVERY (261).
        conn.pragma_update(None, "synchronous", "NORMAL")
            .expect("synchronous");
        conn.busy_timeout(Duration::ZERO).expect("busy_timeout");
        conn
    }

    fn batch(conn: &mut Connection, sql: &str) -> Result<(), rusqlite::Error> {
        conn.execute_batch(sql)
    }

    fn scalar(conn: &mut Connection, sql: &str) -> i64 {
        conn.query_row(sql, [], |r| r.get(0)).expect(sql)
    }

    fn text(conn: &mut Connection, sql: &str) -> String {
        conn.query_row(sql, [], |r| r.get(0)).expect(sql)
    }

    fn transaction(
        conn: &mut Connection,
        policy: &RetryPolicy,
        options: Option<&TxOptions>,
        calls: &mut u32,
        writes: &[&str],
        read: &str,
    ) -> Result<i64, TxError<rusqlite::Error>> {
        let body = |tx: &mut rusqlite::Transaction<'_>| -> Result<i64, rusqlite::Error> {
            *calls += 1;
            for write in writes {
                tx.execute(write, [])?;
            }
            tx.query_row(read, [], |r| r.get(0))
        };
        match options {
            None => txretry::rusqlite::transaction(conn, policy, body),
            Some(options) => txretry::rusqlite::transaction_with(conn, policy, options, body),
        }
    }

    fn assert_no_transaction(conn: &mut Connection) {
        assert!(conn.is_autocommit(), "a transaction is open");
    }

    fn assert_busy(err: &rusqlite::Error) {
        assert_eq!(sqlite_code(err), Some(5), "{err:?}");
        assert!(matches!(err, rusqlite::Error::SqliteFailure(..)), "{err:?}");
    }

    fn assert_foreign_key(err: &rusqlite::Error) {
        assert_eq!(sqlite_code(err), Some(787), "{err:?}");
    }
}

/// The SQLite extended result code of a rusqlite error, if it has one.
pub fn sqlite_code(err: &rusqlite::Error) -> Option<i32> {
    err.sqlite_error().map(|e| e.extended_code)
}

pub use crate::sqlite::{events, recording_policy};
pub use txretry_testkit::outcome::assert_outcome;

/// Many attempts and no wait: a retry would show in the call count.
pub fn eager_policy() -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(10)
        .backoff(Backoff::Constant(Duration::ZERO))
        .build()
        .unwrap()
}

/// Runs `body` in `txretry::rusqlite::transaction` under `policy`; returns what the runner
/// returned and how many times it called `body`.
pub fn run_counting<T, E, Via>(
    conn: &mut Connection,
    policy: &RetryPolicy,
    mut body: impl FnMut(&mut rusqlite::Transaction<'_>) -> Result<T, E>,
) -> (Result<T, TxError<E>>, u32)
where
    E: From<rusqlite::Error> + AsError<Via>,
{
    let mut calls = 0;
    let result = txretry::rusqlite::transaction(conn, policy, |tx| {
        calls += 1;
        body(tx)
    });
    (result, calls)
}

/// An error the runner returned at once: permanent, from the body, after one attempt, with
/// `code` (`None`: the closure's own error).
#[track_caller]
pub fn assert_permanent_once<E: std::fmt::Debug>(err: &TxError<E>, code: Option<Code>) {
    assert_outcome(
        err,
        Verdict::Permanent,
        Phase::Body,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(err.outcome().code(), code, "{err:?}");
}
