//! The records' SQL: the DDL, and every statement a `once` call runs, for each database.

use std::sync::Arc;

use super::Dialect;
use super::dialect::quote;

/// The DDL of the records' table and its index on `created_at` for `dialect`.
pub(super) fn ddl(dialect: Dialect, table: &str) -> String {
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

/// Postgres: taken (bind: [`migrate_lock_name`]) in the transaction that runs the DDL, so
/// that creators of one table take turns (concurrent `CREATE TABLE IF NOT EXISTS` of one
/// table can fail on Postgres, with a unique violation in its catalog).
#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
pub(crate) const MIGRATE_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtext($1))";

/// The name [`MIGRATE_LOCK`] hashes for `table`.
#[cfg(any(feature = "sqlx-postgres", feature = "tokio-postgres"))]
pub(crate) fn migrate_lock_name(table: &str) -> String {
    format!("txretry_tool_calls:{table}")
}

/// Every statement the records need, for one database and table. Built only from fixed
/// strings and the checked table name; values are always bound.
#[cfg_attr(not(once_records), allow(dead_code))]
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
    pub(super) fn new(dialect: Dialect, table: &str) -> Statements {
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
