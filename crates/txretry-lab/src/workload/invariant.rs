//! The invariant checked after a run: what the tables hold against what the workers say
//! they committed.

use std::collections::HashMap;

use sqlx::Pool;

use super::{CommitCounts, INITIAL_BALANCE, Invariant, Schema, Transfer, sql};
use crate::backend::LabDb;
use crate::cli::Workload;

impl Schema {
    /// Checks the invariant against what the workers say they committed: transfer ids
    /// (transfer), row ids, one per commit (hot-rows) or call ids (history); `maybe` holds one key per
    /// transaction whose COMMIT may have landed (an ambiguous outcome), whose effect may be
    /// there once or not at all.
    pub async fn check<DB: LabDb>(
        &self,
        pool: &Pool<DB>,
        committed: &[i64],
        maybe: &[i64],
    ) -> Result<Invariant, sqlx::Error> {
        let mut conn = pool.acquire().await?;
        if self.workload == Workload::History {
            let [port] = DB::fetch_one(&mut conn, self.sql.server_port.clone(), &[]).await?;
            let select = sql(format!("SELECT call_id FROM {}", self.history));
            let ids: Vec<i64> = DB::fetch::<1>(&mut conn, select, &[])
                .await?
                .into_iter()
                .map(|[id]| id)
                .collect();
            return Ok(check_history(&ids, committed, maybe, port));
        }
        let (table, column) = self.valued_rows();
        let select = sql(format!("SELECT id, {column} FROM {table}"));
        let values: HashMap<i64, i64> = DB::fetch::<2>(&mut conn, select, &[])
            .await?
            .into_iter()
            .map(|[id, value]| (id, value))
            .collect();
        if self.workload == Workload::HotRows {
            return Ok(check_hot_rows(self.rows, &values, committed, maybe));
        }
        let query = format!(
            "SELECT transfer_id, from_id, to_id, amount FROM {}",
            self.ledger
        );
        let ledger: Vec<Transfer> = DB::fetch::<4>(&mut conn, sql(query), &[])
            .await?
            .into_iter()
            .map(|[id, from, to, amount]| Transfer {
                id,
                from,
                to,
                amount,
            })
            .collect();
        Ok(check_transfer(
            self.rows, &values, &ledger, committed, maybe,
        ))
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
    outcome(problems, || {
        format!(
            "sum of balances {total} unchanged; {} ledger rows, one per committed transfer; balances match the ledger{}",
            ledger.len(),
            landed_note(landed, maybe_ids.len())
        )
    })
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
    outcome(problems, || {
        format!(
            "sum of counters {sum} = commits{}; every row matches its commits",
            landed_note(
                usize::try_from(sum - committed).unwrap_or(0),
                maybe_rows.len()
            )
        )
    })
}

/// Passed, saying `checked`, when there are no `problems`; else failed, naming them all.
fn outcome(problems: Vec<String>, checked: impl FnOnce() -> String) -> Invariant {
    if problems.is_empty() {
        Invariant::passed(checked())
    } else {
        Invariant::failed(problems.join("; "))
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
