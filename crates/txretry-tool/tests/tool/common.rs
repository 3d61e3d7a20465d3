//! Shared setup: a temp-file SQLite database in WAL mode, a second writer that holds the
//! write lock (so real SQLITE_BUSY happens), pools and connections on it, fast policies,
//! and recorders for the toolbox's hooks.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use txretry_core::{
    Backoff, Code, Phase, RetryPolicy, SqliteBegin, StopReason, TxError, TxOptions, Verdict,
};
use txretry_tool::{
    BoxError, Caller, InvokeError, Tool, ToolContext, ToolFailure, Toolbox, ToolboxBuilder,
};

/// A database file in its own temp directory, in WAL mode. One connection stays open for
/// the database's lifetime (the last connection closing a WAL database checkpoints under an
/// exclusive lock, which would make other connections fail at random).
pub struct Db {
    path: PathBuf,
    _keeper: rusqlite::Connection,
    _dir: tempfile::TempDir,
}

impl Db {
    pub fn new(schema: &str) -> Db {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tool.db");
        let keeper = rusqlite::Connection::open(&path).unwrap();
        keeper.pragma_update(None, "journal_mode", "WAL").unwrap();
        keeper.execute_batch(schema).unwrap();
        Db {
            path,
            _keeper: keeper,
            _dir: dir,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A pool of one connection, busy_timeout 0: a locked database answers SQLITE_BUSY at once.
    pub async fn pool(&self) -> SqlitePool {
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(
                SqliteConnectOptions::new()
                    .filename(&self.path)
                    .journal_mode(SqliteJournalMode::Wal)
                    .busy_timeout(Duration::ZERO),
            )
            .await
            .unwrap()
    }

    /// A blocking connection, busy_timeout 0.
    pub fn conn(&self) -> rusqlite::Connection {
        open(&self.path)
    }

    /// Another writer holding the write lock (`BEGIN IMMEDIATE`) until released.
    pub fn hold(&self) -> Arc<Holder> {
        let holder = Arc::new(Holder::empty());
        holder.arm(self);
        holder
    }

    pub fn scalar(&self, sql: &str) -> i64 {
        self.conn().query_row(sql, [], |r| r.get(0)).unwrap()
    }
}

/// A database whose write lock another writer holds from the start, and a pool on it.
pub struct Locked {
    pub db: Db,
    pub pool: SqlitePool,
    pub holder: Arc<Holder>,
}

impl Locked {
    pub async fn new(schema: &str) -> Locked {
        let db = Db::new(schema);
        let pool = db.pool().await;
        let holder = db.hold();
        Locked { db, pool, holder }
    }
}

pub fn open(path: &Path) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::ZERO).unwrap();
    conn
}

/// The other writer. `release` rolls its transaction back (any thread, any number of times).
pub struct Holder(Mutex<Option<rusqlite::Connection>>);

impl Holder {
    /// A holder that holds nothing.
    pub fn empty() -> Holder {
        Holder(Mutex::new(None))
    }

    /// Takes the write lock (again).
    pub fn arm(&self, db: &Db) {
        self.arm_at(db.path());
    }

    /// Takes the write lock on the database at `path`.
    pub fn arm_at(&self, path: &Path) {
        let conn = open(path);
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        let previous = self.0.lock().unwrap().replace(conn);
        assert!(previous.is_none(), "already holding");
    }

    pub fn release(&self) {
        if let Some(conn) = self.0.lock().unwrap().take() {
            conn.execute_batch("ROLLBACK").unwrap();
        }
    }
}

/// `attempts` attempts, 1 ms constant backoff.
pub fn fast(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Constant(Duration::from_millis(1)))
        .build()
        .unwrap()
}

/// A toolbox of `tool` under [`fast`]`(attempts)`.
pub fn toolbox(attempts: u32, tool: Tool) -> Toolbox {
    Toolbox::builder()
        .policy(fast(attempts))
        .tool(tool)
        .build()
        .unwrap()
}

/// The async tool `name`, taking no arguments, whose handler gets its own clone of
/// `shared` (pools, counters, holders) on every run.
pub fn shared_tool<S, O, E, F, Fut>(name: &str, description: &str, shared: S, handler: F) -> Tool
where
    S: Clone + Send + Sync + 'static,
    O: serde::Serialize,
    E: Into<BoxError>,
    F: Fn(ToolContext, S) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
{
    Tool::new(name, description, move |ctx: ToolContext, _: NoArgs| {
        handler(ctx, shared.clone())
    })
}

/// `UPDATE t SET v = v + 1` in one transaction of the sqlx runner under `policy`, DEFERRED
/// (so each attempt enters the closure and meets the write lock at its UPDATE). Counts its
/// attempts in `attempts`; releases `holder`, if any, after the first.
pub async fn runner_bump(
    pool: &SqlitePool,
    policy: &RetryPolicy,
    attempts: Counter,
    holder: Option<Arc<Holder>>,
) -> Result<(), TxError<sqlx::Error>> {
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
    // Owned, not borrowed: the tools' handler futures must be `Send` for every lifetime of
    // the runner's transaction.
    txretry_sqlx::transaction_with(pool, policy, &deferred, async move |tx| {
        let attempt = attempts.bump();
        let r = sqlx::query("UPDATE t SET v = v + 1")
            .execute(&mut **tx)
            .await;
        if let (1, Some(holder)) = (attempt, &holder) {
            holder.release();
        }
        r.map(drop)
    })
    .await
}

/// A counter shared with handlers.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicU32>);

impl Counter {
    /// Adds one and returns the new count.
    pub fn bump(&self) -> u32 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A retry event as the toolbox's hook saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Retry {
    pub attempt: u32,
    pub max_attempts: u32,
    pub verdict: Verdict,
    pub code: Option<Code>,
    pub tool: Option<String>,
    pub call_id: Option<String>,
    pub level: Option<String>,
}

/// A give-up event as the toolbox's hook saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct GiveUp {
    pub attempts: u32,
    /// Every attempt the event lists: verdict, phase, code, the error's text.
    pub listed: Vec<(Verdict, Phase, Option<Code>, String)>,
    /// Whether `outcome.history()` has the listed attempts' verdicts, codes and phases.
    pub outcome_matches: bool,
    /// The last error's text.
    pub error: String,
    pub verdict: Verdict,
    pub reason: StopReason,
    pub tool: Option<String>,
    pub call_id: Option<String>,
    pub level: Option<String>,
}

/// Records what the toolbox's `on_retry` / `on_give_up` hooks receive.
#[derive(Clone, Default)]
pub struct Events {
    retries: Arc<Mutex<Vec<Retry>>>,
    give_ups: Arc<Mutex<Vec<GiveUp>>>,
}

impl Events {
    pub fn install(&self, builder: ToolboxBuilder) -> ToolboxBuilder {
        let (retries, give_ups) = (self.retries.clone(), self.give_ups.clone());
        builder
            .on_retry(move |e| {
                retries.lock().unwrap().push(Retry {
                    attempt: e.attempt,
                    max_attempts: e.max_attempts,
                    verdict: e.verdict,
                    code: e.code,
                    tool: e.tool.map(str::to_owned),
                    call_id: e.call_id.map(str::to_owned),
                    level: e.policy_level.map(str::to_owned),
                });
            })
            .on_give_up(move |e| {
                let failures = e.attempts.iter().map(|a| a.failure);
                give_ups.lock().unwrap().push(GiveUp {
                    attempts: e.outcome.attempts(),
                    listed: (e.attempts.iter())
                        .map(|a| {
                            let f = a.failure;
                            (f.verdict, f.phase, f.code, a.error.clone())
                        })
                        .collect(),
                    outcome_matches: failures.eq(e.outcome.history().iter().copied()),
                    error: e.error.to_string(),
                    verdict: e.outcome.verdict(),
                    reason: e.outcome.stop_reason(),
                    tool: e.tool.map(str::to_owned),
                    call_id: e.call_id.map(str::to_owned),
                    level: e.policy_level.map(str::to_owned),
                });
            })
    }

    /// A toolbox of `tool` under [`fast`]`(attempts)`, its hooks recorded here.
    pub fn toolbox(&self, attempts: u32, tool: Tool) -> Toolbox {
        self.install(Toolbox::builder().policy(fast(attempts)))
            .tool(tool)
            .build()
            .unwrap()
    }

    pub fn retries(&self) -> Vec<Retry> {
        self.retries.lock().unwrap().clone()
    }

    pub fn give_ups(&self) -> Vec<GiveUp> {
        self.give_ups.lock().unwrap().clone()
    }

    /// (attempt, verdict, code) of every retry: what must match between two runs.
    pub fn retry_script(&self) -> Vec<(u32, Verdict, Option<Code>, Option<String>)> {
        self.retries()
            .into_iter()
            .map(|r| (r.attempt, r.verdict, r.code, r.level))
            .collect()
    }
}

pub fn anyone() -> Caller {
    Caller::new(["user"])
}

pub fn failure(result: Result<serde_json::Value, InvokeError>) -> ToolFailure {
    match result {
        Err(InvokeError::Failed(failure)) => failure,
        other => panic!("expected a failed invocation, got {other:?}"),
    }
}

/// Calls `tool` with no arguments under `call_id`, as anyone; a call that hangs fails the
/// test.
pub async fn call(
    toolbox: &Toolbox,
    tool: &str,
    call_id: &str,
) -> Result<serde_json::Value, InvokeError> {
    within(toolbox.invoke(&anyone(), tool, serde_json::json!({}), call_id)).await
}

/// A table `t` with one row, `(1, 0)`.
pub const ONE_ROW: &str = "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL);
                           INSERT INTO t VALUES (1, 0);";

pub const BUSY: Option<Code> = Some(Code::Sqlite(5));

/// A guard against hangs in coordinated tests (not a timing assertion).
pub async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .expect("test hung")
}

/// Empty arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}
