//! Exactly-once tool calls: a tool call's outcome recorded in the same transaction as the
//! tool's writes, so that a call made twice (an agent loop resumed after a crash, an MCP
//! client re-sending after a dropped connection, a retry after an ambiguous COMMIT) has its
//! effect once and gets the first call's answer.
//!
//! The declaration ([`Once`]), the records' table and its SQL live here; the runner that
//! claims, runs and records (`ToolContext::once`) is in `sqlx.rs`, behind the `sqlx-*`
//! features.

use std::error::Error;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use serde::de::DeserializeOwned;
use serde_json::Value;
use txretry_core::{Code, Scope};

#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]
mod sqlx;

#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]
pub use self::sqlx::{OnceBackend, OnceError};

/// The default name of the records' table.
pub(crate) const DEFAULT_TABLE: &str = "txretry_tool_calls";

/// The longest idempotency key, in bytes (UTF-8).
pub(crate) const MAX_KEY_LEN: usize = 255;

type KeyFn = dyn Fn(&Value) -> Result<String, String> + Send + Sync;

/// Declares a tool (with [`Tool::once`](crate::Tool::once)) or every tool of a toolbox (with
/// [`ToolboxBuilder::once`](crate::ToolboxBuilder::once)) *exactly once*: each invocation
/// carries an idempotency key, and the handler's one transaction, run through
/// [`ToolContext::once`](crate::ToolContext#method.once) (features `sqlx-*`), records the
/// call's outcome under that key in the same transaction as the tool's own writes. A second
/// invocation with the same key does not run that transaction's work again: it gets the
/// recorded outcome — the same output, or the same business error.
///
/// - **The key**: the call id given to [`Toolbox::invoke`](crate::Toolbox::invoke) by default
///   ([`Once::new`]), or one derived from the arguments ([`Once::key_from_args`]). Keys are
///   scoped by tool: the record's primary key is `(tool, call_key)`. It must be 1 to 255
///   bytes. A call id is only a good key if it is unique for every *logical* call (a model's
///   tool-call id is; a JSON-RPC request id that restarts at 1 in every session is not).
/// - **The table**: `txretry_tool_calls` unless [`Once::table`] names another (checked as a
///   plain identifier). It is created on first use, or by
///   [`Once::migrate`](crate::Once#method.migrate); its DDL for each database is
///   [`Once::ddl`] (and in the docs of [`ToolContext::once`](crate::ToolContext#method.once)).
///   Old records are deleted with [`Once::prune`](crate::Once#method.prune).
///
/// Cheap to clone (an `Arc`).
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use txretry_tool::Once;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct PlaceOrder { request_id: String, item: i64 }
///
/// // The key is the call id:
/// let by_call = Once::new();
/// assert_eq!(by_call.table_name(), "txretry_tool_calls");
///
/// // The key comes from the arguments, in a table of one's own:
/// let by_request = Once::key_from_args(|args: &PlaceOrder| args.request_id.clone())
///     .table("agent_calls")?;
/// assert_eq!(by_request.table_name(), "agent_calls");
///
/// // Table names are plain identifiers, never spliced into SQL otherwise.
/// assert!(Once::new().table("calls; DROP TABLE orders").is_err());
/// # Ok::<(), txretry_tool::InvalidTableName>(())
/// ```
#[derive(Clone)]
pub struct Once {
    inner: Arc<Inner>,
}

struct Inner {
    table: String,
    key: Option<Arc<KeyFn>>,
    /// Each database's statements for this table, built on first use.
    statements: [OnceLock<Statements>; 3],
}

impl Once {
    /// Exactly once, keyed by the call id, recorded in `txretry_tool_calls`.
    pub fn new() -> Once {
        Once::with(DEFAULT_TABLE.to_owned(), None)
    }

    /// Exactly once, keyed by `key(&args)`: the arguments are deserialized into `A` (the
    /// tool's argument type, or any type they fit) and handed to `key`. Two calls whose
    /// arguments give the same key are the same call, whatever their call ids.
    ///
    /// If the arguments do not fit `A`, or the key is empty or longer than 255 bytes, the
    /// invocation is refused ([`OnceRefused::InvalidKey`]) before the handler runs.
    pub fn key_from_args<A, F>(key: F) -> Once
    where
        A: DeserializeOwned,
        F: Fn(&A) -> String + Send + Sync + 'static,
    {
        let key = move |args: &Value| -> Result<String, String> {
            let parsed = A::deserialize(args).map_err(|e| {
                format!("the key function's argument type does not fit the arguments: {e}")
            })?;
            Ok(key(&parsed))
        };
        Once::with(DEFAULT_TABLE.to_owned(), Some(Arc::new(key)))
    }

    fn with(table: String, key: Option<Arc<KeyFn>>) -> Once {
        Once {
            inner: Arc::new(Inner {
                table,
                key,
                statements: Default::default(),
            }),
        }
    }

    /// Records in the table `name` instead of `txretry_tool_calls`.
    ///
    /// `name` must be a plain identifier: an ASCII letter or `_`, then up to 62 ASCII
    /// letters, digits or `_` (`[A-Za-z_][A-Za-z0-9_]{0,62}`); no schema prefix. It is used
    /// exactly as given, quoted (`"name"` on Postgres and SQLite, `` `name` `` on MySQL), so
    /// on Postgres `Calls` and `calls` are two tables.
    ///
    /// # Errors
    /// [`InvalidTableName`] when `name` is anything else.
    pub fn table(self, name: &str) -> Result<Once, InvalidTableName> {
        if !valid_table(name) {
            return Err(InvalidTableName(name.chars().take(100).collect()));
        }
        Ok(Once::with(name.to_owned(), self.inner.key.clone()))
    }

    /// The records' table.
    pub fn table_name(&self) -> &str {
        &self.inner.table
    }

    /// Whether the key comes from the arguments (else it is the call id).
    pub fn is_keyed_by_args(&self) -> bool {
        self.inner.key.is_some()
    }

    /// The DDL that creates the records' table and its index on `created_at`, for
    /// `dialect`: what [`migrate`](crate::Once#method.migrate) runs (with `IF NOT EXISTS`),
    /// for those who manage their migrations themselves. Statements are separated by `;\n`.
    ///
    /// ```
    /// use txretry_tool::{Dialect, Once};
    ///
    /// let ddl = Once::new().ddl(Dialect::Postgres);
    /// assert!(ddl.starts_with(r#"CREATE TABLE IF NOT EXISTS "txretry_tool_calls" ("#));
    /// assert!(ddl.contains("PRIMARY KEY (tool, call_key)"));
    /// ```
    pub fn ddl(&self, dialect: Dialect) -> String {
        ddl(dialect, &self.inner.table)
    }

    /// The key of one invocation: the call id, or the key function's.
    pub(crate) fn key_for(&self, call_id: &str, args: &Value) -> Result<Arc<str>, String> {
        let key = match &self.inner.key {
            None => call_id.to_owned(),
            Some(key) => key(args)?,
        };
        if key.is_empty() {
            return Err("the idempotency key is empty".to_owned());
        }
        if key.len() > MAX_KEY_LEN {
            return Err(format!(
                "the idempotency key is {} bytes long; the limit is {MAX_KEY_LEN}",
                key.len()
            ));
        }
        Ok(key.into())
    }

    /// The statements for `dialect`, built once.
    #[cfg_attr(
        not(any(
            feature = "sqlx-postgres",
            feature = "sqlx-mysql",
            feature = "sqlx-sqlite"
        )),
        allow(dead_code)
    )]
    pub(crate) fn statements(&self, dialect: Dialect) -> &Statements {
        self.inner.statements[dialect as usize]
            .get_or_init(|| Statements::new(dialect, &self.inner.table))
    }
}

impl Default for Once {
    fn default() -> Self {
        Once::new()
    }
}

impl fmt::Debug for Once {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Once")
            .field("table", &self.inner.table)
            .field(
                "key",
                &if self.inner.key.is_some() {
                    "from the arguments"
                } else {
                    "the call id"
                },
            )
            .finish()
    }
}

fn valid_table(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// A table name that is not a plain identifier (`[A-Za-z_][A-Za-z0-9_]{0,62}`); see
/// [`Once::table`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidTableName(String);

impl InvalidTableName {
    /// The name that was refused (its first 100 characters).
    pub fn name(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InvalidTableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid table name {:?}: use an ASCII letter or '_', then up to 62 ASCII letters, digits or '_'",
            self.0
        )
    }
}

impl Error for InvalidTableName {}

/// The databases the records' table can live in.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// PostgreSQL.
    Postgres = 0,
    /// MySQL 8 / MariaDB 10.5 and later.
    MySql = 1,
    /// SQLite 3.
    Sqlite = 2,
}

/// `name` quoted for `dialect` (it is a checked plain identifier).
fn quote(dialect: Dialect, name: &str) -> String {
    match dialect {
        Dialect::MySql => format!("`{name}`"),
        Dialect::Postgres | Dialect::Sqlite => format!("\"{name}\""),
    }
}

fn ddl(dialect: Dialect, table: &str) -> String {
    let t = quote(dialect, table);
    match dialect {
        Dialect::Postgres => format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n    \
             tool text NOT NULL,\n    \
             call_key text NOT NULL,\n    \
             status text NOT NULL CHECK (status IN ('pending', 'ok', 'error')),\n    \
             output text,\n    \
             error_kind text,\n    \
             error_message text,\n    \
             created_at timestamptz NOT NULL DEFAULT now(),\n    \
             PRIMARY KEY (tool, call_key)\n\
             );\n\
             CREATE INDEX IF NOT EXISTS {index} ON {t} (created_at)",
            index = quote(dialect, &format!("{table}_created_at")),
        ),
        Dialect::MySql => format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n    \
             tool VARBINARY(64) NOT NULL,\n    \
             call_key VARBINARY(255) NOT NULL,\n    \
             status VARCHAR(7) CHARACTER SET ascii NOT NULL,\n    \
             output LONGTEXT CHARACTER SET utf8mb4,\n    \
             error_kind TEXT CHARACTER SET utf8mb4,\n    \
             error_message MEDIUMTEXT CHARACTER SET utf8mb4,\n    \
             created_at DATETIME(6) NOT NULL,\n    \
             PRIMARY KEY (tool, call_key),\n    \
             KEY txretry_created_at (created_at)\n\
             ) ENGINE=InnoDB"
        ),
        Dialect::Sqlite => format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n    \
             tool TEXT NOT NULL,\n    \
             call_key TEXT NOT NULL,\n    \
             status TEXT NOT NULL CHECK (status IN ('pending', 'ok', 'error')),\n    \
             output TEXT,\n    \
             error_kind TEXT,\n    \
             error_message TEXT,\n    \
             created_at TEXT NOT NULL,\n    \
             PRIMARY KEY (tool, call_key)\n\
             );\n\
             CREATE INDEX IF NOT EXISTS {index} ON {t} (created_at)",
            index = quote(dialect, &format!("{table}_created_at")),
        ),
    }
}

/// Every statement the records need, for one database and table. Built only from fixed
/// strings and the checked table name; values are always bound.
#[cfg_attr(
    not(any(
        feature = "sqlx-postgres",
        feature = "sqlx-mysql",
        feature = "sqlx-sqlite"
    )),
    allow(dead_code)
)]
#[derive(Clone)]
pub(crate) struct Statements {
    /// The DDL, statements separated by `;\n`.
    pub(crate) ddl: Arc<str>,
    /// Binds: tool, key. Inserts a pending row unless the key has one; waits for a
    /// concurrent claim of the same key to end.
    pub(crate) claim: Arc<str>,
    /// Binds: tool, key. Returns `status, output, error_kind, error_message`, locked.
    pub(crate) select: Arc<str>,
    /// Binds: output, tool, key.
    pub(crate) record_output: Arc<str>,
    /// Binds: kind, message, tool, key.
    pub(crate) record_error: Arc<str>,
    /// Binds: the age (Postgres: seconds as `f64`; MySQL: microseconds as `i64`; SQLite: a
    /// `-N seconds` modifier).
    pub(crate) prune: Arc<str>,
}

impl Statements {
    fn new(dialect: Dialect, table: &str) -> Statements {
        let t = quote(dialect, table);
        let (claim, select, record_output, record_error, prune) = match dialect {
            Dialect::Postgres => (
                format!(
                    "INSERT INTO {t} (tool, call_key, status) VALUES ($1, $2, 'pending') \
                     ON CONFLICT (tool, call_key) DO NOTHING"
                ),
                format!(
                    "SELECT status, output, error_kind, error_message FROM {t} \
                     WHERE tool = $1 AND call_key = $2 FOR UPDATE"
                ),
                format!(
                    "UPDATE {t} SET status = 'ok', output = $1 WHERE tool = $2 AND call_key = $3"
                ),
                format!(
                    "UPDATE {t} SET status = 'error', error_kind = $1, error_message = $2 \
                     WHERE tool = $3 AND call_key = $4"
                ),
                format!("DELETE FROM {t} WHERE created_at < now() - make_interval(secs => $1)"),
            ),
            Dialect::MySql => (
                format!(
                    "INSERT INTO {t} (tool, call_key, status, created_at) \
                     VALUES (?, ?, 'pending', UTC_TIMESTAMP(6)) \
                     ON DUPLICATE KEY UPDATE status = status"
                ),
                format!(
                    "SELECT status, output, error_kind, error_message FROM {t} \
                     WHERE tool = ? AND call_key = ? FOR UPDATE"
                ),
                format!("UPDATE {t} SET status = 'ok', output = ? WHERE tool = ? AND call_key = ?"),
                format!(
                    "UPDATE {t} SET status = 'error', error_kind = ?, error_message = ? \
                     WHERE tool = ? AND call_key = ?"
                ),
                format!(
                    "DELETE FROM {t} WHERE created_at < UTC_TIMESTAMP(6) - INTERVAL ? MICROSECOND"
                ),
            ),
            Dialect::Sqlite => (
                format!(
                    "INSERT INTO {t} (tool, call_key, status, created_at) \
                     VALUES (?, ?, 'pending', strftime('%Y-%m-%d %H:%M:%f', 'now')) \
                     ON CONFLICT (tool, call_key) DO NOTHING"
                ),
                format!(
                    "SELECT status, output, error_kind, error_message FROM {t} \
                     WHERE tool = ? AND call_key = ?"
                ),
                format!("UPDATE {t} SET status = 'ok', output = ? WHERE tool = ? AND call_key = ?"),
                format!(
                    "UPDATE {t} SET status = 'error', error_kind = ?, error_message = ? \
                     WHERE tool = ? AND call_key = ?"
                ),
                format!(
                    "DELETE FROM {t} WHERE created_at < strftime('%Y-%m-%d %H:%M:%f', 'now', ?)"
                ),
            ),
        };
        Statements {
            ddl: ddl(dialect, table).into(),
            claim: claim.into(),
            select: select.into(),
            record_output: record_output.into(),
            record_error: record_error.into(),
            prune: prune.into(),
        }
    }
}

/// A business error, as a `once` tool records it and as every call with its key gets it
/// back: a `kind` (a short code for programs) and a `message` (for the model). Its
/// `Display` is the message.
///
/// Return it (converted into your closure's error type, e.g. `BoxError` or `anyhow::Error`)
/// from the closure of [`ToolContext::once`](crate::ToolContext#method.once) to choose the kind;
/// any other error the policy judges permanent is recorded with the kind taken from its
/// database code (`SQLSTATE 23505`, `MySQL error 1062`, …) or `error`, and its `Display` as
/// the message.
///
/// ```
/// use txretry_tool::{BoxError, BusinessError};
///
/// let refusal: BoxError = BusinessError::new("out_of_stock", "only 3 left").into();
/// assert_eq!(refusal.to_string(), "only 3 left");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BusinessError {
    kind: String,
    message: String,
}

impl BusinessError {
    /// A business error with this kind and message.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        BusinessError {
            kind: kind.into(),
            message: message.into(),
        }
    }

    /// The kind: what the closure's [`BusinessError`] said, else the database code of the
    /// error, else `error`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What a `once` call records for `error`, which the policy judged permanent (its
    /// code, if any, is `code`).
    #[cfg_attr(
        not(any(
            feature = "sqlx-postgres",
            feature = "sqlx-mysql",
            feature = "sqlx-sqlite"
        )),
        allow(dead_code)
    )]
    pub(crate) fn from_error(error: &(dyn Error + 'static), code: Option<Code>) -> Self {
        let mut link = Some(error);
        for _ in 0..64 {
            let Some(current) = link else { break };
            if let Some(business) = current.downcast_ref::<BusinessError>() {
                return business.clone();
            }
            link = current.source();
        }
        BusinessError {
            kind: code.map_or_else(|| "error".to_owned(), |code| code.to_string()),
            message: error.to_string(),
        }
    }
}

impl fmt::Display for BusinessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for BusinessError {}

/// Why a `once` tool's call was refused: it was used in a way that would break "exactly
/// once". Returned as [`InvokeError::OnceRefused`](crate::InvokeError::OnceRefused); never
/// retried.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OnceRefused {
    /// [`ToolContext::once`](crate::ToolContext#method.once) was called by a tool that is not
    /// declared `once` ([`Tool::once`](crate::Tool::once),
    /// [`ToolboxBuilder::once`](crate::ToolboxBuilder::once)). Nothing ran.
    NotDeclared,
    /// The idempotency key could not be had (the arguments do not fit the key function's
    /// type), or is empty or longer than 255 bytes. The handler did not run.
    InvalidKey(String),
    /// The handler started a second `ToolContext::once` transaction in one run. It was
    /// refused before it began; the first one's work stands (and is recorded).
    SecondTransaction,
    /// A transaction under [`ToolContext::policy`](crate::ToolContext::policy) committed
    /// during a run of a `once` tool's handler, outside `ToolContext::once`: its work is not
    /// covered by the record, so a repeated call would do it again. When it committed
    /// before `ToolContext::once` was called, that call was refused before it began; when
    /// it committed after (or without) it, this is reported when the run ends.
    CommittedOutside {
        /// How many such transactions committed.
        transactions: u32,
    },
}

impl fmt::Display for OnceRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OnceRefused::NotDeclared => f.write_str(
                "ToolContext::once is only for tools declared once (Tool::once or ToolboxBuilder::once)",
            ),
            OnceRefused::InvalidKey(why) => write!(f, "no usable idempotency key: {why}"),
            OnceRefused::SecondTransaction => f.write_str(
                "a once tool runs one transaction per call: a second ToolContext::once was refused",
            ),
            OnceRefused::CommittedOutside { transactions } => write!(
                f,
                "a once tool runs one transaction per call, through ToolContext::once: {transactions} other transaction{} committed under the tool's policy, and a repeated call would run {} again",
                if *transactions == 1 { "" } else { "s" },
                if *transactions == 1 { "it" } else { "them" },
            ),
        }
    }
}

impl Error for OnceRefused {}

/// How a run's `once` transaction ended, as the invocation loop reads it.
const NOTHING: u8 = 0;
const OUTPUT: u8 = 1;
const BUSINESS: u8 = 2;

/// One run of a `once` tool's handler: its key, and what its `ToolContext::once` did (read
/// by the invocation loop when the run ends).
pub(crate) struct OnceRun {
    pub(crate) once: Once,
    pub(crate) key: Arc<str>,
    scope: Scope,
    /// The scope's commit count when the run began.
    successes_at_start: u32,
    began: AtomicBool,
    /// NOTHING, OUTPUT or BUSINESS: the once transaction committed with this outcome
    /// (recorded now, or replayed).
    ended: AtomicU8,
    refused: Mutex<Option<OnceRefused>>,
}

impl OnceRun {
    pub(crate) fn new(once: Once, key: Arc<str>, scope: &Scope) -> Self {
        OnceRun {
            once,
            key,
            scope: scope.clone(),
            successes_at_start: scope.successes(),
            began: AtomicBool::new(false),
            ended: AtomicU8::new(NOTHING),
            refused: Mutex::new(None),
        }
    }

    /// Called when `ToolContext::once` starts: `Err` when it must not.
    #[cfg_attr(
        not(any(
            feature = "sqlx-postgres",
            feature = "sqlx-mysql",
            feature = "sqlx-sqlite"
        )),
        allow(dead_code)
    )]
    pub(crate) fn begin(&self) -> Result<(), OnceRefused> {
        let refused = if self.began.swap(true, Ordering::AcqRel) {
            Some(OnceRefused::SecondTransaction)
        } else {
            match self.commits_so_far() {
                0 => None,
                transactions => Some(OnceRefused::CommittedOutside { transactions }),
            }
        };
        match refused {
            None => Ok(()),
            Some(refused) => {
                self.refuse(refused.clone());
                Err(refused)
            }
        }
    }

    /// Called when the once transaction committed with a recorded output (`business ==
    /// false`) or business error.
    #[cfg_attr(
        not(any(
            feature = "sqlx-postgres",
            feature = "sqlx-mysql",
            feature = "sqlx-sqlite"
        )),
        allow(dead_code)
    )]
    pub(crate) fn ended(&self, business: bool) {
        self.ended
            .store(if business { BUSINESS } else { OUTPUT }, Ordering::Release);
    }

    fn refuse(&self, refused: OnceRefused) {
        let mut slot = self.refused.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(refused);
        }
    }

    fn commits_so_far(&self) -> u32 {
        self.scope
            .successes()
            .saturating_sub(self.successes_at_start)
    }

    /// After the run: the refusal it earned, if any.
    pub(crate) fn verdict(&self) -> Option<OnceRefused> {
        if let Some(refused) = self
            .refused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            return Some(refused);
        }
        let ours = u32::from(self.ended.load(Ordering::Acquire) != NOTHING);
        match self.commits_so_far().saturating_sub(ours) {
            0 => None,
            transactions => Some(OnceRefused::CommittedOutside { transactions }),
        }
    }

    /// Whether the run's once transaction recorded (or replayed) a business error.
    pub(crate) fn business(&self) -> bool {
        self.ended.load(Ordering::Acquire) == BUSINESS
    }
}

impl fmt::Debug for OnceRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnceRun")
            .field("table", &self.once.table_name())
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_plain_identifiers() {
        for good in ["t", "_", "txretry_tool_calls", "Calls2", &"a".repeat(63)] {
            assert!(Once::new().table(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "1calls",
            "calls;",
            "my calls",
            "public.calls",
            "\"calls\"",
            "`calls`",
            "callé",
            &"a".repeat(64),
        ] {
            let err = Once::new().table(bad).unwrap_err();
            assert_eq!(err.name(), bad.chars().take(100).collect::<String>());
        }
    }

    #[test]
    fn keys_are_checked() {
        let once = Once::new();
        assert_eq!(&*once.key_for("call-1", &Value::Null).unwrap(), "call-1");
        assert!(once.key_for("", &Value::Null).is_err());
        assert!(once.key_for(&"k".repeat(256), &Value::Null).is_err());
        assert!(once.key_for(&"k".repeat(255), &Value::Null).is_ok());

        #[derive(serde::Deserialize)]
        struct Args {
            id: i64,
        }
        let by_args = Once::key_from_args(|a: &Args| format!("order-{}", a.id));
        let key = by_args
            .key_for("ignored", &serde_json::json!({"id": 7}))
            .unwrap();
        assert_eq!(&*key, "order-7");
        assert!(by_args.key_for("x", &serde_json::json!({})).is_err());
    }

    #[test]
    fn business_errors_keep_their_kind() {
        let boxed: Box<dyn Error + Send + Sync> =
            BusinessError::new("gone", "no such order").into();
        let found = BusinessError::from_error(&*boxed, None);
        assert_eq!(found, BusinessError::new("gone", "no such order"));
        let other = std::io::Error::other("refused");
        let found = BusinessError::from_error(&other, None);
        assert_eq!((found.kind(), found.message()), ("error", "refused"));
    }
}
