//! Per-transaction options every runner's `_with` variant takes. Each adapter turns them
//! into fixed SQL of its own; nothing here is ever spliced from user text.

/// How a runner begins each attempt's transaction.
///
/// # Default
/// The server's default isolation, read-write, and on SQLite `BEGIN IMMEDIATE` (it takes
/// the write lock up front, so two writers queue on `busy_timeout` instead of deadlocking
/// on the upgrade).
///
/// ```
/// use txretry_core::{Isolation, SqliteBegin, TxOptions};
///
/// let opts = TxOptions::new().isolation(Isolation::Serializable).read_only(true);
/// assert_eq!(opts.get_isolation(), Some(Isolation::Serializable));
/// let sqlite = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
/// assert_eq!(sqlite.get_sqlite_begin().as_sql(), "BEGIN DEFERRED");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxOptions {
    isolation: Option<Isolation>,
    read_only: bool,
    idempotent: bool,
    sqlite_begin: SqliteBegin,
    keys: Vec<u64>,
}

impl TxOptions {
    /// The defaults, as a constant.
    pub const DEFAULT: TxOptions = TxOptions {
        isolation: None,
        read_only: false,
        idempotent: false,
        sqlite_begin: SqliteBegin::Immediate,
        keys: Vec::new(),
    };

    /// The defaults.
    pub fn new() -> Self {
        TxOptions::default()
    }

    /// Declares the transaction idempotent: running it twice has the same effect as
    /// running it once (an upsert to a fixed value, a delete by key, an insert guarded by
    /// a unique key you check). Only then does the runner retry an
    /// [`Ambiguous`](crate::Verdict::Ambiguous) failure — a COMMIT whose answer was lost,
    /// which may have landed.
    ///
    /// # Default
    /// false: an ambiguous commit is returned to the caller, with
    /// [`Outcome::may_have_committed`](crate::Outcome::may_have_committed) true.
    #[must_use]
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// Whether the transaction was declared idempotent.
    pub fn is_idempotent(&self) -> bool {
        self.idempotent
    }

    /// The isolation level (Postgres, MySQL/MariaDB). SQLite transactions are always
    /// serializable and its runners ignore this.
    #[must_use]
    pub fn isolation(mut self, level: Isolation) -> Self {
        self.isolation = Some(level);
        self
    }

    /// Begin the transaction read-only (Postgres, MySQL/MariaDB; on SQLite, `query_only`
    /// for the transaction's duration).
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// How SQLite runners begin (ignored by other engines).
    #[must_use]
    pub fn sqlite_begin(mut self, begin: SqliteBegin) -> Self {
        self.sqlite_begin = begin;
        self
    }

    /// Names a key this transaction contends on (a row, an account, a tenant): under a
    /// policy with [`Admission::per_key`](crate::Admission::per_key), attempts naming the
    /// same key never run at the same time in this process, and with
    /// [`Admission::in_database`](crate::Admission::in_database) in no process sharing the
    /// database. Call it once per key; any [`ContentionKey`](crate::ContentionKey) works
    /// (`42`, `"tenant"`, `("account", 42)`, or a type of your own).
    ///
    /// Keys are equal when their values are, whatever their Rust types: `contends_on(42_i32)`
    /// and `contends_on(42_i64)` name the same key. They are compared by their stable
    /// [`KeyHash`](crate::KeyHash).
    #[must_use]
    pub fn contends_on(mut self, key: impl crate::ContentionKey) -> Self {
        let key = crate::KeyHash::of(key).to_u64();
        // Sorted and without repeats: keys are always taken in one order.
        if let Err(at) = self.keys.binary_search(&key) {
            self.keys.insert(at, key);
        }
        self
    }

    /// The named keys, as admission stores them (hashed, sorted).
    pub(crate) fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// The isolation level asked for, if any.
    pub fn get_isolation(&self) -> Option<Isolation> {
        self.isolation
    }

    /// Whether the transaction is read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// How SQLite begins.
    pub fn get_sqlite_begin(&self) -> SqliteBegin {
        self.sqlite_begin
    }

    /// Postgres' `BEGIN [ISOLATION LEVEL …] [READ ONLY]` for these options, from fixed
    /// strings only. Read-write is never spelled out, so the server's
    /// `default_transaction_read_only` (and hot standbys) keep working. For the adapters,
    /// which send it each their own way.
    #[doc(hidden)]
    pub fn postgres_begin(&self) -> String {
        let mut sql = String::from("BEGIN");
        if let Some(level) = self.isolation {
            sql.push_str(" ISOLATION LEVEL ");
            sql.push_str(level.as_sql());
        }
        if self.read_only {
            sql.push_str(" READ ONLY");
        }
        sql
    }

    /// MySQL/MariaDB's `[SET TRANSACTION ISOLATION LEVEL …; ]START TRANSACTION [READ ONLY]`
    /// for these options, from fixed strings only, to send as one text-protocol query.
    /// `SET TRANSACTION` without `SESSION` applies to the next transaction only. For the
    /// adapters.
    #[doc(hidden)]
    pub fn mysql_begin(&self) -> String {
        let mut sql = String::new();
        if let Some(level) = self.isolation {
            sql.push_str("SET TRANSACTION ISOLATION LEVEL ");
            sql.push_str(level.as_sql());
            sql.push_str("; ");
        }
        sql.push_str("START TRANSACTION");
        if self.read_only {
            sql.push_str(" READ ONLY");
        }
        sql
    }
}

/// A standard SQL isolation level.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isolation {
    /// READ UNCOMMITTED.
    ReadUncommitted,
    /// READ COMMITTED.
    ReadCommitted,
    /// REPEATABLE READ.
    RepeatableRead,
    /// SERIALIZABLE.
    Serializable,
}

impl Isolation {
    /// The level as SQL keywords, e.g. `"REPEATABLE READ"`.
    pub fn as_sql(self) -> &'static str {
        match self {
            Isolation::ReadUncommitted => "READ UNCOMMITTED",
            Isolation::ReadCommitted => "READ COMMITTED",
            Isolation::RepeatableRead => "REPEATABLE READ",
            Isolation::Serializable => "SERIALIZABLE",
        }
    }
}

/// How an SQLite transaction begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SqliteBegin {
    /// `BEGIN DEFERRED`: locks are taken on first use. A reader that later writes can fail
    /// with `SQLITE_BUSY` / `SQLITE_BUSY_SNAPSHOT` that no busy timeout cures; the runner
    /// retries the whole transaction.
    Deferred,
    /// `BEGIN IMMEDIATE`: the write lock is taken at once.
    #[default]
    Immediate,
    /// `BEGIN EXCLUSIVE`.
    Exclusive,
}

impl SqliteBegin {
    /// The statement that begins the transaction.
    pub fn as_sql(self) -> &'static str {
        match self {
            SqliteBegin::Deferred => "BEGIN DEFERRED",
            SqliteBegin::Immediate => "BEGIN IMMEDIATE",
            SqliteBegin::Exclusive => "BEGIN EXCLUSIVE",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn begin_statements_follow_the_options() {
        let plain = TxOptions::new();
        let both = TxOptions::new()
            .isolation(Isolation::Serializable)
            .read_only(true);
        assert_eq!(plain.postgres_begin(), "BEGIN");
        assert_eq!(
            both.postgres_begin(),
            "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY"
        );
        assert_eq!(plain.mysql_begin(), "START TRANSACTION");
        assert_eq!(
            both.mysql_begin(),
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; START TRANSACTION READ ONLY"
        );
    }
}
