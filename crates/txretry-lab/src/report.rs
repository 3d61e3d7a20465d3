//! The numbers of one run as reported (JSON and human), and the human output: a summary
//! for one run, a comparison table for several.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::duration::format_duration;
use crate::grid;
use crate::run::RunResult;
use crate::stats::{Percentiles, ratio};
use crate::target::Target;
use crate::timeline::FaultTimeline;
use crate::workload::CommitCounts;

/// [`Setup::isolation`] when no level was set and the server did not name its default.
pub const SERVER_DEFAULT: &str = "server-default";

/// Where and how the runs ran: the same for every run of one invocation.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The database, password redacted.
    pub db: String,
    /// `sqlite`, `postgres` or `mysql`.
    pub engine: &'static str,
    /// `transfer` or `hot-rows`.
    pub workload: &'static str,
    /// The isolation the transactions ran at (`read-committed (server default)` when not
    /// set, or [`SERVER_DEFAULT`] if the server did not say; SQLite: always `serializable`).
    pub isolation: String,
    /// How SQLite transactions began; `None` on other engines.
    pub sqlite_begin: Option<&'static str>,
    /// Accounts or hot rows.
    pub rows: u32,
    /// Concurrent workers (in each process).
    pub workers: usize,
    /// Processes that ran the workload at once (`--processes`).
    pub processes: usize,
    /// The requested duration of each run.
    pub duration: std::time::Duration,
}

/// One run, as the JSON array holds it. Rates and percentiles are `null` when undefined
/// (nothing committed).
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// The preset's name.
    pub policy: &'static str,
    /// What the preset does.
    pub policy_description: String,
    /// The database, password redacted.
    pub db: String,
    /// `sqlite`, `postgres` or `mysql`.
    pub engine: &'static str,
    /// `transfer` or `hot-rows`.
    pub workload: &'static str,
    /// Isolation level.
    pub isolation: String,
    /// SQLite's begin behaviour (`null` on other engines).
    pub sqlite_begin: Option<&'static str>,
    /// Accounts or hot rows.
    pub rows: u32,
    /// Concurrent workers in each process.
    pub workers: usize,
    /// Processes that ran the workload at once, each with `workers` workers; the counts
    /// are their sums, the percentiles those of every process's commits together.
    pub processes: usize,
    /// Requested duration, seconds.
    pub duration_s: f64,
    /// Measured duration (until the last transaction ended), seconds.
    pub elapsed_s: f64,
    /// Transactions committed.
    pub committed: u64,
    /// Transactions refused for a business reason (insufficient funds).
    pub business_failed: u64,
    /// Transactions whose database error surfaced.
    pub failed: u64,
    /// `failed` by verdict: a transient kind's name, `ambiguous` or `permanent`.
    pub failed_by_kind: BTreeMap<String, u64>,
    /// The first error message of each kind in `failed_by_kind`, passwords masked.
    pub first_error_by_kind: BTreeMap<String, String>,
    /// Every attempt, first ones included.
    pub attempts: u64,
    /// attempts / committed.
    pub attempts_per_commit: Option<f64>,
    /// Retries (counted by the policy's `on_retry` hook).
    pub retries: u64,
    /// Retries by kind; every kind is present.
    pub retries_by_kind: BTreeMap<String, u64>,
    /// retries / committed.
    pub retries_per_commit: Option<f64>,
    /// Commits per second of elapsed time.
    pub tps: f64,
    /// Latency of committed transactions (retries and waits included), milliseconds.
    pub p50_ms: Option<f64>,
    /// 95th percentile, milliseconds.
    pub p95_ms: Option<f64>,
    /// 99th percentile, milliseconds.
    pub p99_ms: Option<f64>,
    /// Slowest commit, milliseconds.
    pub max_ms: Option<f64>,
    /// Whether the invariant held.
    pub invariant_ok: bool,
    /// What the invariant check found.
    pub invariant: String,
    /// Whether Ctrl-C cut the run short.
    pub interrupted: bool,
    /// With `--processes` above 1: each process's commits (absent otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub committed_by_process: Vec<u64>,
    /// The history workload's counts: acknowledged, lost, doubled, ambiguous (absent for
    /// the other workloads).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<CommitCounts>,
    /// With `--fault`: each fault's timeline (absent otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultTimeline>,
}

impl RunReport {
    /// The report of `result`, run with `setup`.
    pub fn new(setup: &Setup, mut result: RunResult) -> RunReport {
        let t = &mut result.tally;
        let latency = Percentiles::of(&t.latencies);
        let elapsed = result.elapsed.as_secs_f64();
        let retries = result.retries.total();
        RunReport {
            policy: result.preset.name(),
            policy_description: result.preset.describe(),
            db: setup.db.clone(),
            engine: setup.engine,
            workload: setup.workload,
            isolation: setup.isolation.clone(),
            sqlite_begin: setup.sqlite_begin,
            rows: setup.rows,
            workers: setup.workers,
            processes: setup.processes,
            duration_s: setup.duration.as_secs_f64(),
            elapsed_s: round(elapsed, 3),
            committed: t.committed,
            business_failed: t.business_failed,
            failed: t.failed(),
            failed_by_kind: t.failed_by_kind.clone(),
            first_error_by_kind: std::mem::take(&mut t.first_errors),
            attempts: t.attempts,
            attempts_per_commit: ratio(t.attempts, t.committed).map(|r| round(r, 3)),
            retries,
            retries_by_kind: result.retries.by_kind(),
            retries_per_commit: ratio(retries, t.committed).map(|r| round(r, 3)),
            tps: if elapsed > 0.0 {
                round(t.committed as f64 / elapsed, 1)
            } else {
                0.0
            },
            p50_ms: latency.p50.map(|v| round(v, 3)),
            p95_ms: latency.p95.map(|v| round(v, 3)),
            p99_ms: latency.p99.map(|v| round(v, 3)),
            max_ms: latency.max.map(|v| round(v, 3)),
            invariant_ok: result.invariant.ok,
            invariant: result.invariant.detail,
            interrupted: result.interrupted,
            committed_by_process: result.committed_by_process,
            history: result.invariant.counts,
            faults: result.faults,
        }
    }
}

impl RunReport {
    /// The report with every password of `target` masked in the error messages it quotes.
    pub fn scrubbed(mut self, target: &Target) -> RunReport {
        for message in self.first_error_by_kind.values_mut() {
            *message = target.scrub(message);
        }
        for fault in &mut self.faults {
            if let Some(error) = &mut fault.error {
                *error = target.scrub(error);
            }
        }
        self
    }

    /// How far the run overran its duration, when it did by more than a rounding: the
    /// transactions in flight at the deadline finish first (retries and waits included).
    pub fn overran(&self) -> Option<String> {
        let over = self.elapsed_s - self.duration_s;
        let in_flight = if self.faults.is_empty() {
            "transactions"
        } else {
            "a fault (until its command returns) and transactions"
        };
        (over > (self.duration_s * 0.1).max(0.25)).then(|| {
            format!(
                "ran {:.1}s of the {:.1}s asked: {in_flight} in flight at the deadline finish first, retries and waits included",
                self.elapsed_s, self.duration_s
            )
        })
    }
}

/// `1 one` or `n many`.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

fn round(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}

/// The line saying what ran where.
pub fn headline(setup: &Setup) -> String {
    let begin = setup
        .sqlite_begin
        .map(|b| format!(", begin {b}"))
        .unwrap_or_default();
    let workers = count(setup.workers as u64, "worker", "workers");
    let workers = if setup.processes > 1 {
        format!(
            "{} x {workers}",
            count(setup.processes as u64, "process", "processes")
        )
    } else {
        workers
    };
    format!(
        "txretry-lab: {} on {}, {}, {workers}, {} per policy, isolation {}{begin}",
        setup.workload,
        setup.db,
        count(setup.rows, "row", "rows"),
        format_duration(setup.duration),
        setup.isolation
    )
}

fn opt(value: Option<f64>, places: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.places$}"))
}

fn nonzero(map: &BTreeMap<String, u64>) -> String {
    let parts: Vec<String> = map
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k}:{n}"))
        .collect();
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(" ")
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "OK" } else { "FAILED" }
}

/// The human summary of one run.
pub fn summary(setup: &Setup, r: &RunReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", headline(setup));
    let _ = writeln!(out, "policy {}: {}", r.policy, r.policy_description);
    if r.interrupted {
        let _ = writeln!(out, "(interrupted after {:.1}s)", r.elapsed_s);
    }
    let mut rows: Vec<(String, String)> = vec![(
        "committed".into(),
        format!(
            "{}  ({:.1} tx/s over {:.2}s)",
            r.committed, r.tps, r.elapsed_s
        ),
    )];
    if !r.committed_by_process.is_empty() {
        let each: Vec<String> = r.committed_by_process.iter().map(u64::to_string).collect();
        rows.push((
            "by process".into(),
            format!("{} committed", each.join(" + ")),
        ));
    }
    // Hot-rows refuses nothing: a line of zeros about insufficient funds would only puzzle.
    if has_business_failures(r) {
        rows.push((
            "business failures".into(),
            format!(
                "{}  (insufficient funds: a real outcome, never retried)",
                r.business_failed
            ),
        ));
    }
    rows.push((
        "failed".into(),
        if r.failed > 0 {
            format!(
                "{}  {}  (gave up with a database error: lost)",
                r.failed,
                nonzero(&r.failed_by_kind)
            )
        } else {
            "0".to_owned()
        },
    ));
    for (kind, message) in &r.first_error_by_kind {
        rows.push((format!("  first {kind}"), message.clone()));
    }
    rows.extend([
        (
            "attempts".into(),
            format!(
                "{}  ({} per commit)",
                r.attempts,
                opt(r.attempts_per_commit, 3)
            ),
        ),
        (
            "retries".into(),
            format!(
                "{}  ({} per commit)  {}",
                r.retries,
                opt(r.retries_per_commit, 3),
                nonzero(&r.retries_by_kind)
            ),
        ),
        (
            "latency (commits)".into(),
            format!(
                "p50 {} ms  p95 {} ms  p99 {} ms  max {} ms",
                opt(r.p50_ms, 2),
                opt(r.p95_ms, 2),
                opt(r.p99_ms, 2),
                opt(r.max_ms, 2)
            ),
        ),
        (
            "invariant".into(),
            format!("{}  ({})", verdict(r.invariant_ok), r.invariant),
        ),
    ]);
    if let Some(h) = &r.history {
        rows.push((
            "history".into(),
            format!(
                "acknowledged {}, lost {}, doubled {}, ambiguous {} ({} landed)",
                h.acknowledged, h.lost, h.doubled, h.ambiguous, h.ambiguous_landed
            ),
        ));
    }
    if let Some(overran) = r.overran() {
        rows.push(("note".into(), overran));
    }
    for (label, value) in rows {
        let _ = writeln!(out, "  {label:<18} {}", value.trim_end());
    }
    out.push_str(&faults(r));
    out
}

/// `+N ms`, or `?` when unknown.
fn ms(value: Option<i64>) -> String {
    value.map_or_else(|| "?".to_owned(), |v| format!("{v:+} ms"))
}

/// The timeline of each fault of a `--fault` run, and the run's totals (nothing for a run
/// without faults).
pub fn faults(r: &RunReport) -> String {
    let mut out = String::new();
    if r.faults.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "faults under {} (times after the fault struck; the cluster's = its own probe write through the proxy):",
        r.policy
    );
    for (i, f) in r.faults.iter().enumerate() {
        let nodes = match (&f.from, &f.to) {
            (Some(from), Some(to)) => format!("{from} -> {to}"),
            _ => "?".to_owned(),
        };
        let _ = writeln!(
            out,
            "  #{} {} {nodes}, requested at {:.1}s, struck {} later, command {:.1}s",
            i + 1,
            f.kind,
            f.requested_at_s,
            ms(f.fault_after_request_ms).trim_start_matches('+'),
            f.command_ms as f64 / 1000.0
        );
        if let Some(error) = &f.error {
            let _ = writeln!(out, "     fault failed: {error}");
            continue;
        }
        let new_port = f
            .new_primary_port
            .map_or_else(String::new, |p| format!(" (port {p})"));
        let _ = writeln!(
            out,
            "     first failure seen {}; first commit on the new primary{new_port} {}: write outage {} vs cluster {} (app adds {})",
            ms(f.first_failure_ms),
            ms(f.first_commit_on_new_primary_ms),
            ms(f.first_commit_on_new_primary_ms).trim_start_matches('+'),
            ms(f.cluster_writable_ms).trim_start_matches('+'),
            ms(f.extra_ms)
        );
        if f.first_commit_on_new_primary_ms.is_none() {
            let _ = writeln!(
                out,
                "     no commit on a node other than the old leader before the next fault or the end of the run"
            );
        }
        let _ = writeln!(
            out,
            "     retries {}; failed {}",
            nonzero(&f.retries_by_kind),
            nonzero(&f.failed_by_kind)
        );
    }
    let ambiguous = r
        .failed_by_kind
        .get(crate::stats::AMBIGUOUS)
        .copied()
        .unwrap_or(0);
    let _ = match &r.history {
        Some(h) => writeln!(
            out,
            "  totals: committed {}, ambiguous {ambiguous} ({} landed, {} not), failed {} (ambiguous included), lost {}, doubled {}",
            r.committed,
            h.ambiguous_landed,
            h.ambiguous.saturating_sub(h.ambiguous_landed),
            r.failed,
            h.lost,
            h.doubled
        ),
        None => writeln!(
            out,
            "  totals: committed {}, ambiguous {ambiguous}, failed {}",
            r.committed, r.failed
        ),
    };
    out
}

/// Whether the workload can refuse a transaction for a business reason (transfer can).
fn has_business_failures(r: &RunReport) -> bool {
    r.workload == "transfer"
}

/// What the table's columns mean, one line under it.
pub const LEGEND: &str = "committed: transactions that committed; biz-fail: refused for insufficient funds (a real outcome, not an error); failed: gave up with a database error (lost); att/commit, retry/commit: attempts and retries per commit; p50-p99: latency of commits, retries and waits included";

/// The comparison table of several runs.
pub fn table(setup: &Setup, reports: &[RunReport]) -> String {
    let header = [
        "policy",
        "committed",
        "tps",
        "biz-fail",
        "failed",
        "att/commit",
        "retry/commit",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "invariant",
        "retries by kind",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for r in reports {
        rows.push(vec![
            r.policy.to_owned(),
            r.committed.to_string(),
            format!("{:.1}", r.tps),
            if has_business_failures(r) {
                r.business_failed.to_string()
            } else {
                "-".to_owned()
            },
            r.failed.to_string(),
            opt(r.attempts_per_commit, 3),
            opt(r.retries_per_commit, 3),
            opt(r.p50_ms, 2),
            opt(r.p95_ms, 2),
            opt(r.p99_ms, 2),
            verdict(r.invariant_ok).to_owned(),
            nonzero(&r.retries_by_kind),
        ]);
    }
    let columns = header.len();
    let mut out = String::new();
    let _ = writeln!(out, "{}", headline(setup));
    // Text columns left-aligned, numbers right-aligned.
    out.push_str(&grid::render(&header, rows, |c| c == 0 || c >= columns - 2));
    let _ = writeln!(out, "{LEGEND}");
    for (kind, (policies, message)) in first_errors(reports) {
        let _ = writeln!(
            out,
            "first {kind} failure ({}): {message}",
            policies.join(", ")
        );
    }
    for r in reports {
        if let Some(overran) = r.overran() {
            let _ = writeln!(out, "note: {} {overran}", r.policy);
        }
    }
    for r in reports.iter().filter(|r| !r.invariant_ok) {
        let _ = writeln!(out, "invariant FAILED for {}: {}", r.policy, r.invariant);
    }
    for r in reports {
        out.push_str(&faults(r));
    }
    if reports.iter().any(|r| r.interrupted) {
        let _ = writeln!(out, "(interrupted: the last run was cut short)");
    }
    out
}

/// The first message of each failure kind over several runs, with the policies that
/// failed with that kind.
fn first_errors(reports: &[RunReport]) -> BTreeMap<&str, (Vec<&str>, &str)> {
    let mut kinds: BTreeMap<&str, (Vec<&str>, &str)> = BTreeMap::new();
    for r in reports {
        for (kind, message) in &r.first_error_by_kind {
            kinds
                .entry(kind)
                .or_insert_with(|| (Vec::new(), message))
                .0
                .push(r.policy);
        }
    }
    kinds
}
