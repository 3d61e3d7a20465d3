//! The human summary of one run.

use std::fmt::Write as _;

use super::{
    RunReport, Setup, appendix_text, has_business_failures, headline, nonzero, opt, verdict,
};

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
    out.push_str(appendix_text(r));
    out
}
