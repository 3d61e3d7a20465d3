//! The numbers of one run as reported (JSON and human), and the human output: a summary
//! for one run (`summary.rs`), a comparison table for several (`table.rs`), each with what
//! the place appended to a run ([`Appendix`]: the bench's fault timelines).

mod summary;
mod table;

pub use summary::summary;
pub use table::{LEGEND, table};

use std::collections::BTreeMap;

use serde::Serialize;

use crate::duration::format_duration;
use crate::run::RunResult;
use crate::stats::{Percentiles, ratio};
use crate::target::Target;
use crate::workload::CommitCounts;

/// What a place appends to a run's report: something happened beside the workload (the
/// bench's `--fault`: each fault's timeline). Its text and hint are printed under the run;
/// its keys join the run's JSON object.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Appendix {
    /// Keys added to the run's JSON object.
    #[serde(flatten)]
    pub json: serde_json::Map<String, serde_json::Value>,
    /// Printed under the run (each line ending in a newline).
    #[serde(skip)]
    pub text: String,
    /// A hint about the run, printed with the others.
    #[serde(skip)]
    pub hint: Option<String>,
    /// What was in flight at the deadline besides transactions, for the overrun's note
    /// (e.g. "a fault (until its command returns)").
    #[serde(skip)]
    pub in_flight: &'static str,
}

/// [`Setup::isolation`] when no level was set and the server did not name its default.
pub const SERVER_DEFAULT: &str = "server-default";

/// Where and how the runs ran: the same for every run of one invocation, and in each
/// run's JSON object.
#[derive(Clone, Debug, Serialize)]
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
    /// Processes that ran the workload at once (`--processes`), each with `workers`
    /// workers; a run's counts are their sums, its percentiles those of every process's
    /// commits together.
    pub processes: usize,
    /// The requested duration of each run (in JSON: `duration_s`, seconds).
    #[serde(rename = "duration_s", serialize_with = "seconds")]
    pub duration: std::time::Duration,
}

fn seconds<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// One run, as the JSON array holds it. Rates and percentiles are `null` when undefined
/// (nothing committed).
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// The preset's name.
    pub policy: &'static str,
    /// What the preset does.
    pub policy_description: String,
    /// Where and how it ran (its keys join the object).
    #[serde(flatten)]
    pub setup: Setup,
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
    /// Transactions the end of the run (its duration, Ctrl-C) cut short: rolled back after
    /// a failure their policy would have retried. Neither committed nor failed.
    pub cut_short: u64,
    /// Every attempt, first ones included: `committed + business_failed + failed +
    /// cut_short + retries`.
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
    /// What the place appended (the bench's `faults`, each fault's timeline).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub appendix: Option<Appendix>,
}

impl RunReport {
    /// The report of `result`, run with `setup`.
    pub fn new(setup: &Setup, mut result: RunResult) -> RunReport {
        let measured = &mut result.measured;
        let t = &mut measured.tally;
        let latency = Percentiles::of(&t.latencies);
        let elapsed = measured.elapsed.as_secs_f64();
        let retries = measured.retries.total();
        RunReport {
            policy: result.preset.name(),
            policy_description: result.preset.describe(),
            setup: setup.clone(),
            elapsed_s: round(elapsed, 3),
            committed: t.committed,
            business_failed: t.business_failed,
            failed: t.failed(),
            failed_by_kind: t.failed_by_kind.clone(),
            first_error_by_kind: std::mem::take(&mut t.first_errors),
            cut_short: t.cut_short,
            attempts: t.attempts,
            attempts_per_commit: ratio(t.attempts, t.committed).map(|r| round(r, 3)),
            retries,
            retries_by_kind: measured.retries.by_kind(),
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
            interrupted: measured.interrupted,
            committed_by_process: result.committed_by_process,
            history: result.invariant.counts,
            appendix: result.appendix,
        }
    }

    /// The report with every password of `target` masked in the error messages it quotes.
    pub fn scrubbed(mut self, target: &Target) -> RunReport {
        for message in self.first_error_by_kind.values_mut() {
            *message = target.scrub(message);
        }
        if let Some(appendix) = &mut self.appendix {
            appendix.text = target.scrub(&appendix.text);
            appendix.hint = appendix.hint.as_deref().map(|h| target.scrub(h));
            for value in appendix.json.values_mut() {
                scrub_strings(value, target);
            }
        }
        self
    }

    /// How far the run overran its duration, when it did by more than a rounding: the
    /// attempts in flight at the deadline finish first (a lock wait, an admission wait, a
    /// retry's wait that had begun), and what runs beside the run (a fault) ends.
    pub fn overran(&self) -> Option<String> {
        let asked = self.setup.duration.as_secs_f64();
        let over = self.elapsed_s - asked;
        let in_flight = match &self.appendix {
            Some(a) if !a.in_flight.is_empty() => format!("{} and transactions", a.in_flight),
            _ => "transactions".to_owned(),
        };
        (over > (asked * 0.1).max(0.25)).then(|| {
            format!(
                "ran {:.1}s of the {:.1}s asked: {in_flight} in flight at the deadline finish first (their current attempt or wait, no new retry)",
                self.elapsed_s, asked
            )
        })
    }
}

/// Every string in `value` with `target`'s passwords masked.
fn scrub_strings(value: &mut serde_json::Value, target: &Target) {
    match value {
        serde_json::Value::String(text) => *text = target.scrub(text),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| scrub_strings(v, target)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| scrub_strings(v, target)),
        _ => {}
    }
}

/// The text a place appended under a run (empty without an appendix).
pub fn appendix_text(r: &RunReport) -> &str {
    r.appendix.as_ref().map_or("", |a| a.text.as_str())
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

/// `kind:n` for every nonzero count, or `-`.
pub fn nonzero(map: &BTreeMap<String, u64>) -> String {
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

/// Whether the workload can refuse a transaction for a business reason (transfer can).
fn has_business_failures(r: &RunReport) -> bool {
    r.setup.workload == "transfer"
}
