//! The declaration of an exactly-once tool: its key and its records' table.

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Dialect, InvalidTableName, Statements, statements, table_name};

/// The default name of the records' table.
pub(crate) const DEFAULT_TABLE: &str = "txretry_tool_calls";

/// The longest idempotency key, in bytes (UTF-8).
pub(crate) const MAX_KEY_LEN: usize = 255;

type KeyFn = dyn Fn(&Value) -> Result<String, String> + Send + Sync;

/// Declares a tool (with [`Tool::once`](crate::Tool::once)) or every tool of a toolbox (with
/// [`ToolboxBuilder::once`](crate::ToolboxBuilder::once)) *exactly once*: each invocation
/// carries an idempotency key, and the handler's one transaction, run through
/// [`ToolContext::once`](crate::ToolContext#method.once) (features `sqlx-*`) or a driver's
/// `once_*` (`once_tokio_postgres`, `once_mysql_async`, `once_rusqlite`), records the
/// call's outcome under that key in the same transaction as the tool's own writes. A second
/// invocation with the same key does not run that transaction's work again: it gets the
/// recorded outcome — the same output, or the same business error.
///
/// - **The key**: the call id given to [`Toolbox::invoke`](crate::Toolbox::invoke) by default
///   ([`Once::new`]), or one derived from the arguments ([`Once::key_from_args`]). Keys are
///   scoped by tool: the record's primary key is `(tool, call_key)`. It must be 1 to 255
///   bytes, without a NUL character (Postgres text cannot hold one). A call id is only a
///   good key if it is unique for every *logical* call (a model's tool-call id is; a
///   JSON-RPC request id that restarts at 1 in every session is not).
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
    /// The longest idempotency key the records hold, in bytes (UTF-8): a longer one is
    /// refused, as is one with a NUL character.
    pub const MAX_KEY_LEN: usize = MAX_KEY_LEN;

    /// Exactly once, keyed by the call id, recorded in `txretry_tool_calls`.
    pub fn new() -> Once {
        Once::with(DEFAULT_TABLE.to_owned(), None)
    }

    /// Exactly once, keyed by `key(&args)`: the arguments are deserialized into `A` (the
    /// tool's argument type, or any type they fit) and handed to `key`. Two calls whose
    /// arguments give the same key are the same call, whatever their call ids.
    ///
    /// If the arguments do not fit `A`, or the key is empty, longer than 255 bytes or holds
    /// a NUL character, the invocation is refused
    /// ([`OnceRefused::InvalidKey`](crate::OnceRefused::InvalidKey)) before the handler runs.
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
    /// A table of that name that exists already is used as it is (`CREATE TABLE IF NOT
    /// EXISTS`): create it from [`ddl`](Once::ddl). One without the primary key on `(tool,
    /// call_key)` fails every claim on Postgres and SQLite, but MySQL takes the claims
    /// (each call then inserts a record of its own, and a repeated call runs again).
    ///
    /// # Errors
    /// [`InvalidTableName`] when `name` is anything else.
    pub fn table(self, name: &str) -> Result<Once, InvalidTableName> {
        if !table_name::is_valid(name) {
            return Err(InvalidTableName::new(name));
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
        statements::ddl(dialect, &self.inner.table)
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
        // Refused on every database alike: Postgres cannot store it (22021), and a key that
        // only some databases take would make one tool behave differently on each.
        if key.contains('\0') {
            return Err("the idempotency key holds a NUL character".to_owned());
        }
        Ok(key.into())
    }

    /// The statements for `dialect`, built once.
    #[cfg_attr(not(once_records), allow(dead_code))]
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

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::Once;

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
        assert!(once.key_for("a\0b", &Value::Null).is_err());

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
}
