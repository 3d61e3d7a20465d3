//! The three workloads: their tables, the transaction each worker runs, and the invariant
//! checked after a run. Written once for every database.
//!
//! - **transfer**: `rows` accounts start with [`INITIAL_BALANCE`] each. A transfer reads
//!   the payer's balance, refuses (insufficient funds, a business failure) when it is too
//!   low, else debits the payer (guarded by `balance >= amount`, so a concurrent debit
//!   under READ COMMITTED cannot overdraw), credits the payee and writes one ledger row
//!   keyed by a transfer id the client chose. Afterwards: the sum of balances is unchanged,
//!   the ledger holds exactly the committed transfer ids, once each, every balance equals
//!   its opening balance plus the ledger's credits minus its debits, and none is negative.
//! - **hot-rows**: `rows` counters start at 0. A transaction reads a random row, then adds
//!   one to it. Afterwards: every row's counter equals the commits on that row (so their
//!   sum equals all commits).
//! - **history**: a transaction asks which server it runs on (its port: through a proxy,
//!   the node's) and inserts one row, its call id (unique per worker and sequence) and
//!   that port, into a table with no unique key, so a call that ran twice shows twice.
//!   Afterwards, on the server the check reaches (after a failover, the final primary):
//!   no acknowledged call is missing (lost), none is there twice (doubled), an ambiguous
//!   one is there once or not at all, and no row belongs to a call that failed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

use crate::backend::LabDb;
use crate::cli::Workload;

mod invariant;
mod tables;
mod transactions;

pub use invariant::{check_history, check_hot_rows, check_transfer};
pub use transactions::Job;

/// Every account's opening balance (transfer).
pub const INITIAL_BALANCE: i64 = 1000;
/// The largest amount one transfer moves (amounts are uniform in `1..=MAX_AMOUNT`).
pub const MAX_AMOUNT: i64 = 200;

/// One transfer, chosen by a worker before its transaction starts (a retry repeats the
/// same transfer).
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// Unique within the run; the ledger's key.
    pub id: i64,
    /// The paying account.
    pub from: i64,
    /// The receiving account.
    pub to: i64,
    /// How much moves.
    pub amount: i64,
}

/// The statements of one run, with its table names and the database's placeholders.
#[derive(Debug)]
struct Statements {
    select_balance: SqlStr,
    debit: SqlStr,
    credit: SqlStr,
    insert_ledger: SqlStr,
    select_counter: SqlStr,
    bump_counter: SqlStr,
    server_port: SqlStr,
    insert_history: SqlStr,
}

/// The tables of one run: created fresh, dropped afterwards. Names are unique per process
/// and run, so runs (and several labs on one server) never see each other's rows.
#[derive(Debug)]
pub struct Schema {
    workload: Workload,
    rows: u32,
    prefix: String,
    accounts: String,
    ledger: String,
    hot: String,
    history: String,
    sql: Statements,
}

/// What the invariant check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invariant {
    /// Whether every check passed.
    pub ok: bool,
    /// What was checked and, when it failed, what was wrong.
    pub detail: String,
    /// The history workload's exact counts (`None` for the other workloads).
    pub counts: Option<CommitCounts>,
}

impl Invariant {
    /// A check that found nothing wrong, saying what it checked.
    pub fn passed(detail: String) -> Invariant {
        Invariant {
            ok: true,
            detail,
            counts: None,
        }
    }

    /// A check that found something wrong (or could not look), saying what.
    pub fn failed(detail: String) -> Invariant {
        Invariant {
            ok: false,
            detail,
            counts: None,
        }
    }
}

/// What the history check counted: every call by how it ended and what the table holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CommitCounts {
    /// Calls the runner acknowledged (`Ok`).
    pub acknowledged: u64,
    /// Acknowledged calls missing from the table: lost commits.
    pub lost: u64,
    /// Calls whose id is in the table more than once: doubled commits.
    pub doubled: u64,
    /// Calls whose COMMIT was ambiguous (its answer was lost).
    pub ambiguous: u64,
    /// Ambiguous calls that are in the table (each once, else they count as doubled).
    pub ambiguous_landed: u64,
    /// Rows of calls that no worker saw commit nor may have committed (a failed call
    /// whose effect is there anyway).
    pub unknown: u64,
    /// The port of the server the check ran on (0 when the database has none: SQLite).
    pub checked_on_port: i64,
}

fn sql(text: String) -> SqlStr {
    AssertSqlSafe(Arc::<str>::from(text)).into_sql_str()
}

impl Schema {
    /// Table names and statements for the next run of `workload` on `DB`. Only names the
    /// lab made up itself (letters, digits, `_`) are ever put into SQL.
    pub fn new<DB: LabDb>(workload: Workload, rows: u32) -> Schema {
        static RUN: AtomicU32 = AtomicU32::new(0);
        let run = RUN.fetch_add(1, Ordering::Relaxed);
        Schema::named::<DB>(
            workload,
            rows,
            format!("txlab_{}_{run}", std::process::id()),
        )
    }

    /// The tables another process made with [`Schema::new`] (`prefix` is its
    /// [`Schema::prefix`], checked by the bench's `--child-tables` parser: `txlab_` and
    /// digits only).
    pub fn named<DB: LabDb>(workload: Workload, rows: u32, prefix: String) -> Schema {
        let (accounts, ledger, hot, history) = (
            format!("{prefix}_accounts"),
            format!("{prefix}_ledger"),
            format!("{prefix}_hot"),
            format!("{prefix}_history"),
        );
        let p = DB::placeholder;
        let sql = Statements {
            select_balance: sql(format!(
                "SELECT balance FROM {accounts} WHERE id = {}",
                p(1)
            )),
            debit: sql(format!(
                "UPDATE {accounts} SET balance = balance - {} WHERE id = {} AND balance >= {}",
                p(1),
                p(2),
                p(3)
            )),
            credit: sql(format!(
                "UPDATE {accounts} SET balance = balance + {} WHERE id = {}",
                p(1),
                p(2)
            )),
            insert_ledger: sql(format!(
                "INSERT INTO {ledger} (transfer_id, from_id, to_id, amount) VALUES ({}, {}, {}, {})",
                p(1),
                p(2),
                p(3),
                p(4)
            )),
            select_counter: sql(format!("SELECT counter FROM {hot} WHERE id = {}", p(1))),
            bump_counter: sql(format!(
                "UPDATE {hot} SET counter = counter + 1 WHERE id = {}",
                p(1)
            )),
            server_port: sql(format!("SELECT {}", DB::SERVER_PORT)),
            insert_history: sql(format!(
                "INSERT INTO {history} (call_id, port) VALUES ({}, {})",
                p(1),
                p(2)
            )),
        };
        Schema {
            workload,
            rows,
            prefix,
            accounts,
            ledger,
            hot,
            history,
            sql,
        }
    }

    /// The workload these tables serve.
    pub fn workload(&self) -> Workload {
        self.workload
    }

    /// Accounts or hot rows.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// What every table name of this run starts with.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The table of numbered rows and its value column: the accounts' balances (transfer)
    /// or the hot rows' counters (hot-rows, and history, which has none).
    pub(super) fn valued_rows(&self) -> (&str, &'static str) {
        match self.workload {
            Workload::Transfer => (&self.accounts, "balance"),
            Workload::HotRows | Workload::History => (&self.hot, "counter"),
        }
    }

    /// The hot-rows table's name, for another client to run the same transaction on
    /// (the sweep's pgbench row).
    pub fn hot_table(&self) -> &str {
        &self.hot
    }
}
