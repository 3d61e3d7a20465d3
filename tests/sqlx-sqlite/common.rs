//! Shared setup: a temp-file WAL database, connections and pools on it, and policies.

use std::path::PathBuf;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{AssertSqlSafe, ConnectOptions, SqliteConnection};
use txretry::RetryPolicy;

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

pub use txretry_testkit::outcome::assert_permanent_once;
pub use txretry_testkit::record::Seen;
pub use txretry_testkit::wait::within;

/// `attempts` attempts, 1 ms × 2ⁿ backoff capped at 20 ms with full jitter; records retries.
pub fn policy(attempts: u32, seen: &Seen) -> RetryPolicy {
    txretry_testkit::record::jittered(attempts, Duration::from_millis(20), seen)
}

/// Runs raw SQL (several statements allowed) on a plain connection (the "other" session)
/// or a pool.
pub async fn exec<'e>(executor: impl sqlx::SqliteExecutor<'e>, text: impl Into<String>) {
    sqlx::raw_sql(sql(text.into()))
        .execute(executor)
        .await
        .unwrap();
}

/// A test's database and a pool of `max_connections` on it (busy timeout 0); the database
/// must outlive the pool. Always `Some`: SQLite needs no server, and the `Option` is only
/// for the tests of `tests/sqlx-shared/`, which skip on `None` on the server binaries.
pub async fn setup(_test: &str, max_connections: u32) -> Option<(TempDb, SqlitePool)> {
    let db = TempDb::new().await;
    let pool = db.pool(max_connections, Duration::ZERO).await;
    Some((db, pool))
}

/// A table name of its own.
pub fn table(prefix: &str) -> String {
    txretry_testkit::unique_name(prefix)
}

/// SQL with a table name spliced in. Names come from `unique_name` (ASCII letters, digits, `_`).
pub fn sql(text: String) -> AssertSqlSafe<String> {
    AssertSqlSafe(text)
}

pub async fn drop_table(pool: &SqlitePool, name: &str) {
    exec(pool, format!("DROP TABLE IF EXISTS {name}")).await;
}
