//! Every statement the orders tools run, written once with `?` placeholders and a `{p}`
//! where the table prefix goes, and the few places where SQLite, Postgres and MySQL/MariaDB
//! disagree (column types, "insert unless present", upsert). Built once per database from
//! these fixed strings and a validated [`Prefix`]; nothing a caller sends ever becomes SQL
//! (the tools bind their arguments).

use std::fmt;
use std::sync::Arc;

use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

/// The SQL dialect of a database the orders tools run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite.
    Sqlite,
    /// PostgreSQL.
    Postgres,
    /// MySQL and MariaDB.
    MySql,
}

/// A prefix for the tables' names, so that several toolboxes (or tests) can share one
/// database: `[a-z_][a-z0-9_]*`, at most [`Prefix::MAX_LEN`] characters, or empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prefix(String);

/// Why a table prefix was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "table prefix {0:?}: expected lowercase letters, digits and underscores, not starting with a digit, at most {max} characters",
    max = Prefix::MAX_LEN
)]
pub struct PrefixError(String);

impl Prefix {
    /// The longest prefix: with the longest table name (`handler_runs`) it stays within
    /// Postgres' 63 and MySQL's 64 characters.
    pub const MAX_LEN: usize = 48;

    /// Checks `prefix` (it goes into SQL as an identifier, so only these characters).
    pub fn new(prefix: &str) -> Result<Prefix, PrefixError> {
        let mut chars = prefix.chars();
        let valid = prefix.len() <= Self::MAX_LEN
            && chars
                .next()
                .is_none_or(|c| c.is_ascii_lowercase() || c == '_')
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if valid {
            Ok(Prefix(prefix.to_owned()))
        } else {
            Err(PrefixError(prefix.to_owned()))
        }
    }

    /// The prefix itself.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The statements of the orders tools in one dialect, with one prefix.
#[derive(Debug)]
pub struct Statements {
    /// Creates the tables and seeds them where they are missing; one script.
    pub schema: SqlStr,
    /// `account, status, cents` of an order; binds the order id.
    pub select_order: SqlStr,
    /// Marks an order cancelled; binds the order id.
    pub cancel_order: SqlStr,
    /// The balance of an account; binds the account id.
    pub balance: SqlStr,
    /// Adds cents to an account; binds the cents, then the account id.
    pub add_cents: SqlStr,
    /// A ledger row for an order's refund; binds call id, order id, account, cents.
    pub ledger_refund: SqlStr,
    /// A ledger row for a transfer; binds call id, account, cents.
    pub ledger_transfer: SqlStr,
    /// Counts a run of a tool's handler; binds the tool's name.
    pub count_run: SqlStr,
    /// How often a tool's handler ran; binds the tool's name.
    pub handler_runs: SqlStr,
    /// Every account's balance.
    pub balances: SqlStr,
}

impl Statements {
    /// The statements for `dialect`, on the tables named with `prefix`.
    pub fn new(dialect: Dialect, prefix: &Prefix) -> Statements {
        let sql = |template: &str| build(dialect, prefix, template);
        let count_run = match dialect {
            Dialect::Sqlite | Dialect::Postgres => {
                "INSERT INTO {p}handler_runs (tool, runs) VALUES (?, 1)
                 ON CONFLICT (tool) DO UPDATE SET runs = {p}handler_runs.runs + 1"
            }
            Dialect::MySql => {
                "INSERT INTO {p}handler_runs (tool, runs) VALUES (?, 1)
                 ON DUPLICATE KEY UPDATE runs = runs + 1"
            }
        };
        Statements {
            schema: sql(&schema(dialect)),
            select_order: sql("SELECT account, status, cents FROM {p}orders WHERE id = ?"),
            cancel_order: sql("UPDATE {p}orders SET status = 'cancelled' WHERE id = ?"),
            balance: sql("SELECT cents FROM {p}accounts WHERE id = ?"),
            add_cents: sql("UPDATE {p}accounts SET cents = cents + ? WHERE id = ?"),
            ledger_refund: sql(
                "INSERT INTO {p}ledger (call_id, order_id, account, cents) VALUES (?, ?, ?, ?)",
            ),
            ledger_transfer: sql(
                "INSERT INTO {p}ledger (call_id, account, cents) VALUES (?, ?, ?)",
            ),
            count_run: sql(count_run),
            handler_runs: sql("SELECT runs FROM {p}handler_runs WHERE tool = ?"),
            balances: sql("SELECT cents FROM {p}accounts"),
        }
    }
}

/// The schema script: the tables, then the seed rows where they are missing.
fn schema(dialect: Dialect) -> String {
    let (serial, insert_missing, on_conflict) = match dialect {
        Dialect::Sqlite => ("INTEGER PRIMARY KEY", "INSERT OR IGNORE INTO", ""),
        Dialect::Postgres => (
            "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
            "INSERT INTO",
            " ON CONFLICT DO NOTHING",
        ),
        Dialect::MySql => (
            "BIGINT AUTO_INCREMENT PRIMARY KEY",
            "INSERT IGNORE INTO",
            "",
        ),
    };
    // Postgres: concurrent `CREATE TABLE IF NOT EXISTS` of one table can fail (a unique
    // violation in its catalog), so servers starting together take turns; one simple query
    // is one transaction, which the advisory lock lasts for.
    let take_turns = match dialect {
        Dialect::Postgres => "SELECT pg_advisory_xact_lock(hashtext('txretry-mcp-orders schema'));",
        Dialect::Sqlite | Dialect::MySql => "",
    };
    format!(
        "{take_turns}
        CREATE TABLE IF NOT EXISTS {{p}}accounts (id BIGINT PRIMARY KEY, cents BIGINT NOT NULL);
        CREATE TABLE IF NOT EXISTS {{p}}orders (
            id BIGINT PRIMARY KEY,
            account BIGINT NOT NULL,
            status VARCHAR(16) NOT NULL,
            cents BIGINT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS {{p}}ledger (
            id {serial},
            call_id TEXT NOT NULL,
            order_id BIGINT,
            account BIGINT NOT NULL,
            cents BIGINT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS {{p}}handler_runs (
            tool VARCHAR(64) PRIMARY KEY,
            runs BIGINT NOT NULL
        );
        {insert_missing} {{p}}accounts (id, cents) VALUES
            (0, 100000), (1, 10000), (2, 10000), (3, 10000), (4, 10000){on_conflict};
        {insert_missing} {{p}}orders (id, account, status, cents) VALUES
            (1, 1, 'open', 2500), (2, 2, 'open', 990), (3, 3, 'shipped', 1200),
            (4, 4, 'open', 1500), (5, 1, 'open', 700), (6, 2, 'open', 3100),
            (7, 3, 'open', 450), (8, 4, 'open', 2000){on_conflict};"
    )
}

/// `template` with the prefix in place of `{p}` and, for Postgres, `$1, $2, …` in place of
/// `?` (no template has a `?` anywhere else).
fn build(dialect: Dialect, prefix: &Prefix, template: &str) -> SqlStr {
    let mut sql = template.replace("{p}", prefix.as_str());
    if dialect == Dialect::Postgres {
        let mut numbered = String::with_capacity(sql.len() + 8);
        for (n, part) in sql.split('?').enumerate() {
            if n > 0 {
                numbered.push('$');
                numbered.push_str(&n.to_string());
            }
            numbered.push_str(part);
        }
        sql = numbered;
    }
    // Fixed templates, numbers and a prefix of [a-z0-9_] only.
    AssertSqlSafe(Arc::<str>::from(sql)).into_sql_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_identifiers() {
        for ok in ["", "a", "_x", "mcp_orders_1_"] {
            assert_eq!(Prefix::new(ok).unwrap().as_str(), ok);
        }
        for bad in ["1a", "A", "a-b", "a b", "a;drop", "é", &"a".repeat(49)] {
            assert!(Prefix::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn postgres_gets_numbered_placeholders() {
        let prefix = Prefix::new("t_").unwrap();
        let pg = Statements::new(Dialect::Postgres, &prefix);
        assert_eq!(
            pg.ledger_refund.as_str(),
            "INSERT INTO t_ledger (call_id, order_id, account, cents) VALUES ($1, $2, $3, $4)"
        );
        let mysql = Statements::new(Dialect::MySql, &prefix);
        assert_eq!(
            mysql.add_cents.as_str(),
            "UPDATE t_accounts SET cents = cents + ? WHERE id = ?"
        );
    }
}
