//! The comparison table of several runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{
    RunReport, Setup, appendix_text, has_business_failures, headline, nonzero, opt, verdict,
};
use crate::grid;

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
        out.push_str(appendix_text(r));
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
