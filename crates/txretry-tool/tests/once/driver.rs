//! What the scenarios need from a driver ([`OnceDriver`]), and what they need to know of
//! the database behind it ([`Db`]). One implementation per driver, in `drivers/`.

use std::time::Duration;

use txretry_tool::{Once, Tool};

use crate::common::Work;

/// A record as the test reads it: status, output, error kind, error message.
pub type Record = (String, Option<String>, Option<String>, Option<String>);

/// The databases, and what the scenarios must know of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Db {
    Postgres,
    MySql,
    Sqlite,
}

impl Db {
    /// SQL counting the sessions that wait on a lock in a statement naming `records`
    /// (`None`: the database cannot say; SQLite's waiters sit in its busy handler).
    ///
    /// MySQL/MariaDB: the process list rather than `information_schema.innodb_trx`: on a
    /// loaded MariaDB 10.11, a claim blocked on the row for seconds was seen missing from
    /// `innodb_trx` while the process list showed it executing. While the first claim
    /// holds the key, a statement naming the (unique) records' table can only be a
    /// duplicate's claim blocked on it.
    pub fn waiting_sql(self, records: &str) -> Option<String> {
        match self {
            Db::Postgres => Some(format!(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
                 AND query LIKE '%{records}%' AND query NOT LIKE '%pg_stat_activity%'"
            )),
            Db::MySql => Some(format!(
                "SELECT count(*) FROM information_schema.processlist \
                 WHERE id <> CONNECTION_ID() AND command IN ('Query', 'Execute') \
                 AND info LIKE '%{records}%'"
            )),
            Db::Sqlite => None,
        }
    }

    /// SQL that makes the record of `key` two hours old.
    pub fn age_sql(self, records: &str, key: &str) -> String {
        match self {
            Db::Postgres => format!(
                "UPDATE {records} SET created_at = now() - interval '2 hours' \
                 WHERE call_key = '{key}'"
            ),
            Db::MySql => format!(
                "UPDATE {records} SET created_at = UTC_TIMESTAMP(6) - INTERVAL 2 HOUR \
                 WHERE call_key = '{key}'"
            ),
            Db::Sqlite => format!(
                "UPDATE {records} SET created_at = \
                 strftime('%Y-%m-%d %H:%M:%f', 'now', '-2 hours') WHERE call_key = '{key}'"
            ),
        }
    }

    /// The kind recorded for a unique violation.
    pub fn unique_kind(self) -> &'static str {
        match self {
            Db::Postgres => "SQLSTATE 23505", // unique_violation
            Db::MySql => "MySQL error 1062",  // ER_DUP_ENTRY
            Db::Sqlite => "SQLite code 1555", // SQLITE_CONSTRAINT_PRIMARYKEY
        }
    }

    /// What the server says of a duplicate primary key: the text a model must be told.
    pub fn unique_phrase(self) -> &'static str {
        match self {
            Db::Postgres => "duplicate key value violates unique constraint",
            Db::MySql => "Duplicate entry",
            Db::Sqlite => "UNIQUE constraint failed",
        }
    }

    /// Whether claims queued behind a claim that rolls back fail as deadlocks (all but
    /// one) before they queue again: InnoDB's gap locks. Postgres hands the key to one
    /// waiter; SQLite has one writer at a time, nothing queues on the row.
    pub fn handoff_deadlocks(self) -> bool {
        self == Db::MySql
    }

    /// The dialect of [`Once::ddl`].
    pub fn dialect(self) -> txretry_tool::Dialect {
        match self {
            Db::Postgres => txretry_tool::Dialect::Postgres,
            Db::MySql => txretry_tool::Dialect::MySql,
            Db::Sqlite => txretry_tool::Dialect::Sqlite,
        }
    }
}

/// One driver on one database, as the scenarios use it: a fixture (the test's own
/// connection for setup and checks), and the test tool whose work runs in that driver's
/// `ToolContext::once*`.
pub trait OnceDriver: Sized + 'static {
    /// What the tool's handler reaches the database with (a pool, a URL, a file path).
    type Handle: Clone + Send + Sync + 'static;

    const DB: Db;

    /// The fixture; `None` when there is no server (skip; a failure under
    /// `TXRETRY_REQUIRE_DB=1`, in txretry-testkit).
    async fn open(test: &str) -> Option<Self>;

    /// The tool's way to the database.
    fn handle(&self) -> Self::Handle;

    /// The server's URL (server databases), for the commit-fault proxy.
    fn server_url(&self) -> Option<&str>;

    /// A way to the database at `url` (the proxy's).
    async fn through(url: &str) -> Self::Handle;

    /// The tool `name`, doing `work` in one `ToolContext::once*` call on `handle`.
    fn tool(handle: &Self::Handle, name: &'static str, work: &Work) -> Tool;

    /// `Once::migrate*`.
    async fn migrate(&self, once: &Once);

    /// `Once::prune*`.
    async fn prune(&self, once: &Once, older_than: Duration) -> u64;

    /// Runs statements on the test's own connection.
    async fn exec(&self, sql: String);

    /// The one integer `sql` answers.
    async fn scalar(&self, sql: String) -> i64;

    /// The record of `key` in `records`.
    async fn record(&self, records: &str, key: &str) -> Record;
}
