//! Shared setup: a temp-file WAL database, connections and pools on it, and policies.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, SqliteConnection};
use tokio::sync::Notify;
use txretry::{
    Backoff, Classification, Code, Jitter, Outcome, Phase, RetryEvent, RetryPolicy, StopReason,
    Verdict,
};

/// A database file in its own temp directory (removed on drop), in WAL mode.
///
/// One connection stays open for the database's lifetime: when the last connection to a
/// WAL database closes, SQLite checkpoints under an exclusive lock, which would make
/// connections opened meanwhile (busy_timeout 0) fail at random.
pub struct TempDb {
    keeper: tokio::sync::Mutex<SqliteConnection>,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl TempDb {
    pub async fn new() -> TempDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("test.db");
        let keeper = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .connect()
            .await
            .unwrap();
        TempDb {
            keeper: tokio::sync::Mutex::new(keeper),
            path,
            _dir: dir,
        }
    }

    /// Runs setup SQL (on the keeper connection).
    pub async fn exec(&self, sql: &'static str) {
        exec(&mut *self.keeper.lock().await, sql).await;
    }

    /// Connection options with the given busy timeout (sqlx's default is 5 s).
    pub fn options(&self, busy_timeout: Duration) -> SqliteConnectOptions {
        SqliteConnectOptions::new()
            .filename(&self.path)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(busy_timeout)
    }

    /// A second, independent connection: the "other writer".
    pub async fn connect(&self) -> SqliteConnection {
        self.options(Duration::ZERO).connect().await.unwrap()
    }

    pub async fn pool(&self, max_connections: u32, busy_timeout: Duration) -> SqlitePool {
        SqlitePoolOptions::new()
            .max_connections(max_connections)
            .connect_with(self.options(busy_timeout))
            .await
            .unwrap()
    }
}

/// What the policy's `on_retry` hook saw: `txretry::classify` of each real error that was
/// retried, with the failed attempt's number.
#[derive(Clone, Default)]
pub struct Seen {
    events: Arc<Mutex<Vec<(u32, Classification)>>>,
    retried: Arc<Notify>,
}

impl Seen {
    pub fn all(&self) -> Vec<(u32, Classification)> {
        self.events.lock().unwrap().clone()
    }

    /// Resolves once the runner has failed at least once (and is about to retry).
    pub async fn first_retry(&self) {
        within(self.retried.notified()).await;
    }

    fn record(&self, event: &RetryEvent<'_>) {
        self.events
            .lock()
            .unwrap()
            .push((event.attempt, txretry::classify(event.error)));
        self.retried.notify_one();
    }
}

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at 20 ms with full jitter; records retries.
pub fn policy(attempts: u32, seen: &Seen) -> RetryPolicy {
    let seen = seen.clone();
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(1),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(20))
        .jitter(Jitter::Full)
        .on_retry(move |event| seen.record(event))
        .build()
        .unwrap()
}

/// A guard against hangs in coordinated tests (not a timing assertion).
pub async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("test hung")
}

/// Runs raw SQL on a plain connection (the "other" session).
pub async fn exec(conn: &mut SqliteConnection, sql: &'static str) {
    sqlx::raw_sql(sql).execute(conn).await.unwrap();
}

/// The outcome of a failure that is the caller's to handle: permanent, before COMMIT, on
/// the first attempt, never a message match, certainly not committed.
#[track_caller]
pub fn assert_permanent_once(outcome: &Outcome) {
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.phase(), Phase::Body, "{outcome:?}");
    assert_eq!(outcome.attempts(), 1, "{outcome:?}");
    assert_eq!(outcome.history().len(), 1, "{outcome:?}");
    assert_eq!(
        outcome.stop_reason(),
        StopReason::NotRetryable,
        "{outcome:?}"
    );
    assert!(!outcome.may_have_committed(), "{outcome:?}");
    assert!(
        !matches!(outcome.code(), Some(Code::Message(_))),
        "not a message match: {outcome:?}"
    );
}
