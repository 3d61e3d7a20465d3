//! The two workloads: their tables, the transaction each worker runs, and the invariant
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

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::{
    AssertSqlSafe, ColumnIndex, Decode, Encode, Executor, IntoArguments, Pool, Row, SqlSafeStr,
    SqlStr, Transaction, Type,
};

use crate::backend::LabDb;
use crate::cli::Workload;
use crate::error::TxError;

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

    /// The tables another lab process made with [`Schema::new`] (`prefix` is its
    /// [`Schema::prefix`], checked by [`crate::cli::parse_table_prefix`]).
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

    /// The hot-rows table's name, for another client to run the same transaction on
    /// (the sweep's pgbench row).
    pub fn hot_table(&self) -> &str {
        &self.hot
    }
}

/// The lab's queries, generic over the database. The bounds say what sqlx must offer;
/// Postgres, MySQL and SQLite all do.
impl Schema {
    /// Creates this run's tables and fills them.
    pub async fn create<DB>(&self, pool: &Pool<DB>) -> Result<(), sqlx::Error>
    where
        DB: LabDb,
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    {
        let mut conn = pool.acquire().await?;
        let ddl = match self.workload {
            Workload::Transfer => vec![
                format!(
                    "CREATE TABLE {} (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)",
                    self.accounts
                ),
                format!(
                    "CREATE TABLE {} (transfer_id BIGINT PRIMARY KEY, from_id BIGINT NOT NULL, to_id BIGINT NOT NULL, amount BIGINT NOT NULL)",
                    self.ledger
                ),
            ],
            Workload::HotRows => vec![format!(
                "CREATE TABLE {} (id BIGINT PRIMARY KEY, counter BIGINT NOT NULL)",
                self.hot
            )],
            // No unique key: a call that ran twice must show twice.
            Workload::History => vec![format!(
                "CREATE TABLE {} (call_id BIGINT NOT NULL, port BIGINT NOT NULL)",
                self.history
            )],
        };
        for statement in ddl {
            sqlx::raw_sql(sql(statement)).execute(&mut *conn).await?;
        }
        let (table, value) = match self.workload {
            Workload::Transfer => (&self.accounts, INITIAL_BALANCE),
            Workload::HotRows => (&self.hot, 0),
            // Starts empty.
            Workload::History => return Ok(()),
        };
        // Literal integers the lab generated, in batches: one round trip per 500 rows.
        let ids: Vec<u32> = (1..=self.rows).collect();
        for chunk in ids.chunks(500) {
            let values: Vec<String> = chunk.iter().map(|id| format!("({id}, {value})")).collect();
            let column = if self.workload == Workload::Transfer {
                "balance"
            } else {
                "counter"
            };
            let insert = format!(
                "INSERT INTO {table} (id, {column}) VALUES {}",
                values.join(", ")
            );
            sqlx::raw_sql(sql(insert)).execute(&mut *conn).await?;
        }
        Ok(())
    }

    /// Drops this run's tables (those that exist).
    pub async fn drop_tables<DB>(&self, pool: &Pool<DB>) -> Result<(), sqlx::Error>
    where
        DB: LabDb,
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    {
        let mut conn = pool.acquire().await?;
        for table in [&self.accounts, &self.ledger, &self.hot, &self.history] {
            sqlx::raw_sql(sql(format!("DROP TABLE IF EXISTS {table}")))
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    /// The transfer transaction: read, refuse or debit, credit, ledger row.
    pub async fn transfer<DB>(
        &self,
        tx: &mut Transaction<'_, DB>,
        t: &Transfer,
    ) -> Result<(), TxError>
    where
        DB: LabDb,
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
        DB::Arguments: IntoArguments<DB>,
        i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
        usize: ColumnIndex<DB::Row>,
    {
        let s = &self.sql;
        let row = sqlx::query(s.select_balance.clone())
            .bind(t.from)
            .fetch_one(&mut **tx)
            .await?;
        let balance: i64 = row.try_get(0usize)?;
        let refused = TxError::InsufficientFunds {
            account: t.from,
            balance,
            amount: t.amount,
        };
        if balance < t.amount {
            return Err(refused);
        }
        let debited = sqlx::query(s.debit.clone())
            .bind(t.amount)
            .bind(t.from)
            .bind(t.amount)
            .execute(&mut **tx)
            .await?;
        if DB::rows_affected(&debited) == 0 {
            // A concurrent transfer spent the money since we looked (READ COMMITTED).
            return Err(refused);
        }
        sqlx::query(s.credit.clone())
            .bind(t.amount)
            .bind(t.to)
            .execute(&mut **tx)
            .await?;
        sqlx::query(s.insert_ledger.clone())
            .bind(t.id)
            .bind(t.from)
            .bind(t.to)
            .bind(t.amount)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// The hot-rows transaction: read the row, add one to it.
    pub async fn bump<DB>(&self, tx: &mut Transaction<'_, DB>, row_id: i64) -> Result<(), TxError>
    where
        DB: LabDb,
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
        DB::Arguments: IntoArguments<DB>,
        i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
        usize: ColumnIndex<DB::Row>,
    {
        let s = &self.sql;
        let row = sqlx::query(s.select_counter.clone())
            .bind(row_id)
            .fetch_one(&mut **tx)
            .await?;
        let _counter: i64 = row.try_get(0usize)?;
        sqlx::query(s.bump_counter.clone())
            .bind(row_id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// The history transaction: ask the server its port, insert the call's row; returns
    /// the port (the node the commit lands on, if it commits).
    pub async fn record<DB>(
        &self,
        tx: &mut Transaction<'_, DB>,
        call_id: i64,
    ) -> Result<i64, TxError>
    where
        DB: LabDb,
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
        DB::Arguments: IntoArguments<DB>,
        i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
        usize: ColumnIndex<DB::Row>,
    {
        let s = &self.sql;
        let row = sqlx::query(s.server_port.clone())
            .fetch_one(&mut **tx)
            .await?;
        let port: i64 = row.try_get(0usize)?;
        sqlx::query(s.insert_history.clone())
            .bind(call_id)
            .bind(port)
            .execute(&mut **tx)
            .await?;
        Ok(port)
    }

    /// Checks the invariant against what the workers say they committed: transfer ids
    /// (transfer), row ids, one per commit (hot-rows) or call ids (history); `maybe` holds one key per
    /// transaction whose COMMIT may have landed (an ambiguous outcome), whose effect may be
    /// there once or not at all.
    pub async fn check<DB>(
        &self,
        pool: &Pool<DB>,
        committed: &[i64],
        maybe: &[i64],
    ) -> Result<Invariant, sqlx::Error>
    where
        DB: LabDb,
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
        DB::Arguments: IntoArguments<DB>,
        i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
        usize: ColumnIndex<DB::Row>,
    {
        let mut conn = pool.acquire().await?;
        if self.workload == Workload::History {
            let port: i64 = sqlx::query(self.sql.server_port.clone())
                .fetch_one(&mut *conn)
                .await?
                .try_get(0usize)?;
            let mut ids = Vec::new();
            for row in sqlx::query(sql(format!("SELECT call_id FROM {}", self.history)))
                .fetch_all(&mut *conn)
                .await?
            {
                ids.push(row.try_get::<i64, _>(0usize)?);
            }
            return Ok(check_history(&ids, committed, maybe, port));
        }
        let table = if self.workload == Workload::Transfer {
            &self.accounts
        } else {
            &self.hot
        };
        let column = if self.workload == Workload::Transfer {
            "balance"
        } else {
            "counter"
        };
        let mut values = HashMap::new();
        for row in sqlx::query(sql(format!("SELECT id, {column} FROM {table}")))
            .fetch_all(&mut *conn)
            .await?
        {
            values.insert(
                row.try_get::<i64, _>(0usize)?,
                row.try_get::<i64, _>(1usize)?,
            );
        }
        let ledger = if self.workload == Workload::Transfer {
            let query = format!(
                "SELECT transfer_id, from_id, to_id, amount FROM {}",
                self.ledger
            );
            let mut ledger = Vec::new();
            for row in sqlx::query(sql(query)).fetch_all(&mut *conn).await? {
                ledger.push(Transfer {
                    id: row.try_get(0usize)?,
                    from: row.try_get(1usize)?,
                    to: row.try_get(2usize)?,
                    amount: row.try_get(3usize)?,
                });
            }
            ledger
        } else {
            Vec::new()
        };
        Ok(match self.workload {
            Workload::Transfer => check_transfer(self.rows, &values, &ledger, committed, maybe),
            Workload::HotRows => check_hot_rows(self.rows, &values, committed, maybe),
            Workload::History => unreachable!("checked above"),
        })
    }
}

/// The transfer invariant, from the final balances, the ledger, the committed ids and the
/// ids whose COMMIT may have landed (each allowed in the ledger once or not at all).
pub fn check_transfer(
    rows: u32,
    balances: &HashMap<i64, i64>,
    ledger: &[Transfer],
    committed: &[i64],
    maybe: &[i64],
) -> Invariant {
    let mut problems = Vec::new();
    let expected_total = i64::from(rows) * INITIAL_BALANCE;
    let total: i64 = balances.values().sum();
    if total != expected_total {
        problems.push(format!(
            "sum of balances is {total}, expected {expected_total}"
        ));
    }
    if balances.len() != rows as usize {
        problems.push(format!("{} accounts, expected {rows}", balances.len()));
    }
    let negative = balances.values().filter(|&&b| b < 0).count();
    if negative > 0 {
        problems.push(format!("{negative} account(s) overdrawn"));
    }
    let mut in_ledger: HashMap<i64, u32> = HashMap::new();
    let mut expected = balances
        .keys()
        .map(|&id| (id, INITIAL_BALANCE))
        .collect::<HashMap<_, _>>();
    for t in ledger {
        *in_ledger.entry(t.id).or_default() += 1;
        *expected.entry(t.from).or_default() -= t.amount;
        *expected.entry(t.to).or_default() += t.amount;
    }
    let doubled = in_ledger.values().filter(|&&n| n > 1).count();
    if doubled > 0 {
        problems.push(format!(
            "{doubled} transfer(s) in the ledger more than once"
        ));
    }
    let mut committed_ids: HashMap<i64, u32> = HashMap::new();
    for id in committed {
        *committed_ids.entry(*id).or_default() += 1;
    }
    let missing = committed_ids
        .keys()
        .filter(|id| !in_ledger.contains_key(id))
        .count();
    if missing > 0 {
        problems.push(format!(
            "{missing} committed transfer(s) missing from the ledger"
        ));
    }
    let maybe_ids: std::collections::HashSet<i64> = maybe.iter().copied().collect();
    let unknown = in_ledger
        .keys()
        .filter(|id| !committed_ids.contains_key(id) && !maybe_ids.contains(id))
        .count();
    let landed = maybe_ids
        .iter()
        .filter(|id| in_ledger.contains_key(id))
        .count();
    if unknown > 0 {
        problems.push(format!(
            "{unknown} ledger row(s) for transfers no worker saw commit"
        ));
    }
    let off = balances
        .iter()
        .filter(|(id, balance)| expected.get(id) != Some(balance))
        .count();
    if off > 0 {
        problems.push(format!("{off} balance(s) disagree with the ledger"));
    }
    if problems.is_empty() {
        Invariant {
            counts: None,
            ok: true,
            detail: format!(
                "sum of balances {total} unchanged; {} ledger rows, one per committed transfer; balances match the ledger{}",
                ledger.len(),
                landed_note(landed, maybe_ids.len())
            ),
        }
    } else {
        Invariant {
            ok: false,
            detail: problems.join("; "),
            counts: None,
        }
    }
}

/// The hot-rows invariant: every counter equals the commits on its row, plus at most the
/// transactions on that row whose COMMIT may have landed (`maybe_rows`, one per such
/// transaction).
pub fn check_hot_rows(
    rows: u32,
    counters: &HashMap<i64, i64>,
    committed_rows: &[i64],
    maybe_rows: &[i64],
) -> Invariant {
    let per_row = |keys: &[i64]| {
        let mut n: HashMap<i64, i64> = HashMap::new();
        for row in keys {
            *n.entry(*row).or_default() += 1;
        }
        n
    };
    let commits = per_row(committed_rows);
    let maybes = per_row(maybe_rows);
    let sum: i64 = counters.values().sum();
    let committed = i64::try_from(committed_rows.len()).unwrap_or(i64::MAX);
    let maybe = i64::try_from(maybe_rows.len()).unwrap_or(i64::MAX);
    let mut problems = Vec::new();
    if sum < committed || sum > committed.saturating_add(maybe) {
        problems.push(if maybe == 0 {
            format!("sum of counters is {sum}, but {committed} transactions committed")
        } else {
            format!(
                "sum of counters is {sum}, but {committed} transactions committed and {maybe} may have"
            )
        });
    }
    if counters.len() != rows as usize {
        problems.push(format!("{} rows, expected {rows}", counters.len()));
    }
    let off = counters
        .iter()
        .filter(|(id, n)| {
            let sure = commits.get(id).copied().unwrap_or(0);
            let may = maybes.get(id).copied().unwrap_or(0);
            !(sure..=sure + may).contains(*n)
        })
        .count();
    if off > 0 {
        problems.push(format!(
            "{off} row(s) whose counter differs from its commits"
        ));
    }
    if problems.is_empty() {
        Invariant {
            counts: None,
            ok: true,
            detail: format!(
                "sum of counters {sum} = commits{}; every row matches its commits",
                landed_note(
                    usize::try_from(sum - committed).unwrap_or(0),
                    maybe_rows.len()
                )
            ),
        }
    } else {
        Invariant {
            ok: false,
            detail: problems.join("; "),
            counts: None,
        }
    }
}

/// The history invariant, from the call ids in the table (`rows`, one per row), the
/// acknowledged ones and the ambiguous ones; `port` is the server the table was read on.
/// Lost acknowledged commits are counted and fail the check, whatever the cause
/// (asynchronous replication loses some in a failover: that is the number to see).
pub fn check_history(
    rows: &[i64],
    acknowledged: &[i64],
    ambiguous: &[i64],
    port: i64,
) -> Invariant {
    let mut in_table: HashMap<i64, u64> = HashMap::new();
    for id in rows {
        *in_table.entry(*id).or_default() += 1;
    }
    let acked: std::collections::HashSet<i64> = acknowledged.iter().copied().collect();
    let maybe: std::collections::HashSet<i64> = ambiguous.iter().copied().collect();
    let count = |n: usize| n as u64;
    let counts = CommitCounts {
        acknowledged: count(acknowledged.len()),
        lost: count(acked.iter().filter(|id| !in_table.contains_key(id)).count()),
        doubled: count(in_table.values().filter(|&&n| n > 1).count()),
        ambiguous: count(ambiguous.len()),
        ambiguous_landed: count(maybe.iter().filter(|id| in_table.contains_key(id)).count()),
        unknown: count(
            in_table
                .keys()
                .filter(|id| !acked.contains(id) && !maybe.contains(id))
                .count(),
        ),
        checked_on_port: port,
    };
    let mut problems = Vec::new();
    if acked.len() != acknowledged.len() || maybe.iter().any(|id| acked.contains(id)) {
        // A bug in the lab, not the database: call ids are unique per call.
        problems.push("a call id was used twice by the lab".to_owned());
    }
    if counts.lost > 0 {
        problems.push(format!("{} acknowledged commit(s) lost", counts.lost));
    }
    if counts.doubled > 0 {
        problems.push(format!(
            "{} call(s) committed more than once",
            counts.doubled
        ));
    }
    if counts.unknown > 0 {
        problems.push(format!(
            "{} row(s) of calls no worker saw commit",
            counts.unknown
        ));
    }
    let on = if port > 0 {
        format!(" (read on port {port})")
    } else {
        String::new()
    };
    let detail = if problems.is_empty() {
        format!(
            "{} history rows{on}: every acknowledged call once, none lost, none doubled{}",
            rows.len(),
            landed_note(
                usize::try_from(counts.ambiguous_landed).unwrap_or(0),
                ambiguous.len()
            )
        )
    } else {
        format!("{}{on}", problems.join("; "))
    };
    Invariant {
        ok: problems.is_empty(),
        detail,
        counts: Some(counts),
    }
}

/// What the invariant's detail says about COMMITs that may have landed: nothing when
/// there were none.
fn landed_note(landed: usize, maybe: usize) -> String {
    if maybe == 0 {
        String::new()
    } else {
        format!(" (of {maybe} ambiguous COMMIT(s), {landed} landed, each once)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balances(values: &[i64]) -> HashMap<i64, i64> {
        values
            .iter()
            .enumerate()
            .map(|(i, &b)| (i as i64 + 1, b))
            .collect()
    }

    #[test]
    fn a_consistent_bank_passes() {
        let ledger = [Transfer {
            id: 7,
            from: 1,
            to: 2,
            amount: 100,
        }];
        let inv = check_transfer(2, &balances(&[900, 1100]), &ledger, &[7], &[]);
        assert!(inv.ok, "{}", inv.detail);
    }

    #[test]
    fn every_kind_of_damage_is_caught() {
        let t = Transfer {
            id: 7,
            from: 1,
            to: 2,
            amount: 100,
        };
        // Money created.
        assert!(!check_transfer(2, &balances(&[900, 1200]), &[t], &[7], &[]).ok);
        // A committed transfer without its ledger row.
        assert!(!check_transfer(2, &balances(&[900, 1100]), &[], &[7], &[]).ok);
        // A ledger row nobody committed or may have committed.
        assert!(!check_transfer(2, &balances(&[900, 1100]), &[t], &[], &[]).ok);
        // A transfer applied twice.
        assert!(!check_transfer(2, &balances(&[800, 1200]), &[t, t], &[7], &[]).ok);
        // Balances moved without the ledger agreeing, though the sum holds.
        assert!(!check_transfer(2, &balances(&[1000, 1000]), &[t], &[7], &[]).ok);
        // Overdrawn.
        let big = Transfer { amount: 1100, ..t };
        assert!(!check_transfer(2, &balances(&[-100, 2100]), &[big], &[7], &[]).ok);
    }

    #[test]
    fn an_ambiguous_commit_may_land_once_or_not_at_all() {
        let t = Transfer {
            id: 7,
            from: 1,
            to: 2,
            amount: 100,
        };
        // Landed: its row is in the ledger once.
        let landed = check_transfer(2, &balances(&[900, 1100]), &[t], &[], &[7]);
        assert!(landed.ok, "{}", landed.detail);
        assert!(
            landed.detail.contains("of 1 ambiguous COMMIT(s), 1 landed"),
            "{}",
            landed.detail
        );
        // Did not land.
        let lost = check_transfer(2, &balances(&[1000, 1000]), &[], &[], &[7]);
        assert!(lost.ok, "{}", lost.detail);
        assert!(lost.detail.contains("0 landed"), "{}", lost.detail);
        // Landed twice: still caught.
        assert!(!check_transfer(2, &balances(&[800, 1200]), &[t, t], &[], &[7]).ok);
        // An ambiguous id does not excuse another id's row.
        assert!(!check_transfer(2, &balances(&[900, 1100]), &[t], &[], &[8]).ok);

        let counters: HashMap<i64, i64> = [(1, 2), (2, 1)].into();
        // Row 1: one sure commit and one that may have landed (it did).
        assert!(check_hot_rows(2, &counters, &[1, 2], &[1]).ok);
        // Row 1: one that may have landed did not.
        let counters_lost: HashMap<i64, i64> = [(1, 1), (2, 1)].into();
        assert!(check_hot_rows(2, &counters_lost, &[1, 2], &[1]).ok);
        // The maybe is on another row: row 1 is one above its commits.
        assert!(!check_hot_rows(2, &counters, &[1, 2], &[2]).ok);
        // One ambiguous COMMIT cannot account for two increments.
        let twice: HashMap<i64, i64> = [(1, 3), (2, 1)].into();
        assert!(!check_hot_rows(2, &twice, &[1, 2], &[1]).ok);
    }

    #[test]
    fn history_counts_lost_doubled_and_ambiguous_calls() {
        let fine = check_history(&[1, 2, 3], &[1, 2], &[3, 4], 5452);
        assert!(fine.ok, "{}", fine.detail);
        let c = fine.counts.expect("counts");
        assert_eq!((c.acknowledged, c.lost, c.doubled), (2, 0, 0));
        assert_eq!((c.ambiguous, c.ambiguous_landed, c.unknown), (2, 1, 0));
        assert!(fine.detail.contains("port 5452"), "{}", fine.detail);
        // Lost: acknowledged, not there; doubled: there twice; unknown: nobody's.
        let bad = check_history(&[2, 2, 9], &[1, 2], &[], 0);
        assert!(!bad.ok);
        let c = bad.counts.expect("counts");
        assert_eq!((c.lost, c.doubled, c.unknown), (1, 1, 1));
        assert!(
            bad.detail.contains("1 acknowledged commit(s) lost"),
            "{}",
            bad.detail
        );
        // An ambiguous call that landed twice is doubled.
        assert!(!check_history(&[3, 3], &[], &[3], 0).ok);
    }

    #[test]
    fn hot_rows_counts_per_row() {
        let counters: HashMap<i64, i64> = [(1, 2), (2, 1)].into();
        assert!(check_hot_rows(2, &counters, &[1, 2, 1], &[]).ok);
        assert!(!check_hot_rows(2, &counters, &[1, 2], &[]).ok);
        // Right sum, wrong rows.
        assert!(!check_hot_rows(2, &counters, &[2, 2, 1], &[]).ok);
    }
}
