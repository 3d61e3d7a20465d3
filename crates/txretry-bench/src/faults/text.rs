//! The timeline of each fault of a `--fault` run, as the human report prints it.

use std::fmt::Write as _;

use txretry_lab::report::nonzero;
use txretry_lab::run::RunResult;
use txretry_lab::stats::AMBIGUOUS;

use super::timeline::FaultTimeline;

/// `+N ms`, or `?` when unknown.
fn ms(value: Option<i64>) -> String {
    value.map_or_else(|| "?".to_owned(), |v| format!("{v:+} ms"))
}

/// The timeline of each of `faults`, and the totals of `r`, the run they struck (nothing
/// without faults).
pub fn faults(r: &RunResult, faults: &[FaultTimeline]) -> String {
    let mut out = String::new();
    if faults.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "faults under {} (times after the fault struck; the cluster's = its own probe write through the proxy):",
        r.preset.name()
    );
    for (i, f) in faults.iter().enumerate() {
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
    let t = &r.measured.tally;
    let ambiguous = t.failed_by_kind.get(AMBIGUOUS).copied().unwrap_or(0);
    let _ = match &r.invariant.counts {
        Some(h) => writeln!(
            out,
            "  totals: committed {}, ambiguous {ambiguous} ({} landed, {} not), failed {} (ambiguous included), lost {}, doubled {}",
            t.committed,
            h.ambiguous_landed,
            h.ambiguous.saturating_sub(h.ambiguous_landed),
            t.failed(),
            h.lost,
            h.doubled
        ),
        None => writeln!(
            out,
            "  totals: committed {}, ambiguous {ambiguous}, failed {}",
            t.committed,
            t.failed()
        ),
    };
    out
}
