//! The lines under a report that say what the numbers mean when they would otherwise
//! puzzle: nothing retried, a policy that still lost transactions, a Postgres p50 (or a p95
//! with deadlocks) stuck at `deadlock_timeout`. Printed under the summary and under the
//! table alike.

use std::time::Duration;

use txretry::TransientKind;

use crate::backend::ACQUIRE_TIMEOUT;
use crate::report::{RunReport, Setup};
use crate::server::Facts;

/// A latency at or above this share of `deadlock_timeout` counts as "near" it.
const NEAR_DEADLOCK_TIMEOUT: f64 = 0.5;

/// Every hint that applies, one line each (continuations indented).
pub fn hints(setup: &Setup, reports: &[RunReport], facts: &Facts) -> Vec<String> {
    let mut hints = Vec::new();
    // The history workload collides with nothing by design (it measures faults).
    let nothing_retried =
        setup.workload != "history" && reports.iter().all(|r| r.retries == 0 && r.failed == 0);
    if nothing_retried {
        hints.push(if setup.sqlite_begin == Some("immediate") {
            "hint: BEGIN IMMEDIATE makes SQLite writers queue on the busy timeout, so nothing collided and there was nothing to retry;\n      \
             try --sqlite-begin deferred (the lab's default) to see retries".to_owned()
        } else {
            "hint: nothing collided, so there was nothing to retry; try more --workers or fewer --rows".to_owned()
        });
    }
    if let Some(dt) = facts.deadlock_timeout {
        hints.extend(reports.iter().filter_map(|r| near_deadlock_timeout(r, dt)));
    }
    if let Some(lost) = lost_without_retries(reports) {
        hints.push(lost);
    }
    hints.extend(still_lost(reports));
    if reports.iter().any(|r| {
        r.appendix.is_none()
            && r.failed_by_kind
                .contains_key(TransientKind::Connection.as_str())
    }) {
        hints.push(format!(
            "hint: connection failures: a worker waited {}s for a connection (or the server refused one); \
             check the server's max_connections and lower --workers",
            ACQUIRE_TIMEOUT.as_secs()
        ));
    }
    let locked = TransientKind::Locked.as_str();
    if reports
        .iter()
        .any(|r| r.failed_by_kind.contains_key(locked))
    {
        hints.push(
            "hint: SQLITE_LOCKED (code 6) is a table lock of SQLite's shared cache, which sqlite::memory: uses to share one \
             database between connections;\n      no preset retries it (a policy opts in with retry_on); a database file \
             (the lab's default) has writers collide with SQLITE_BUSY instead"
                .to_owned(),
        );
    }
    hints.extend(
        reports
            .iter()
            .filter_map(|r| r.appendix.as_ref()?.hint.clone()),
    );
    hints
}

/// Postgres detects a deadlock only after `deadlock_timeout`: transfers that lock two
/// accounts in random order deadlock, and each one costs that long. A p50 near it says the
/// run mostly waited for the detector; so does a p95 near it in a run that met deadlocks
/// (then the typical commit was quick but one in twenty waited for the detector, often
/// several times over).
fn near_deadlock_timeout(r: &RunReport, deadlock_timeout: Duration) -> Option<String> {
    if r.setup.engine != "postgres" {
        return None;
    }
    let dt_ms = deadlock_timeout.as_secs_f64() * 1000.0;
    let near = |ms: Option<f64>| ms.filter(|&ms| ms >= dt_ms * NEAR_DEADLOCK_TIMEOUT);
    let deadlock = TransientKind::Deadlock.as_str();
    let met_deadlocks = [&r.retries_by_kind, &r.failed_by_kind]
        .iter()
        .any(|by_kind| by_kind.get(deadlock).is_some_and(|&n| n > 0));
    let (label, ms) = match (near(r.p50_ms), near(r.p95_ms)) {
        (Some(p50), _) => ("p50", p50),
        (None, Some(p95)) if met_deadlocks => ("p95", p95),
        _ => return None,
    };
    // What makes transactions on the same rows take turns where this policy does not:
    // per-key admission, or, when it is on already, its database locks across processes.
    let instead = match r.policy {
        "contention" => "--policy database makes them take turns across processes too",
        "database" | "adaptive" => return None,
        _ => "--policy contention makes transactions on the same rows take turns instead",
    };
    Some(format!(
        "hint: {}: {label} {ms:.0} ms is near or past Postgres' deadlock_timeout ({dt_ms:.0} ms): transactions that lock rows in \
         random order deadlock,\n      and Postgres only looks for deadlocks after that wait; {instead}",
        r.policy
    ))
}

/// When the run without retries lost transactions and a retrying one lost none: the
/// point of the comparison, said in words.
fn lost_without_retries(reports: &[RunReport]) -> Option<String> {
    let none = reports
        .iter()
        .find(|r| r.policy == "none" && r.failed > 0)?;
    let clean: Vec<&str> = reports
        .iter()
        .filter(|r| r.policy != "none" && r.failed == 0 && r.committed > 0)
        .map(|r| r.policy)
        .collect();
    (!clean.is_empty()).then(|| {
        format!(
            "note: without retries {} of {} transactions failed on a transient error; {} retried and lost none",
            none.failed,
            none.committed + none.business_failed + none.failed,
            clean.join(", ")
        )
    })
}

/// A retrying policy that still lost transactions: its attempts ran out. An ambiguous
/// COMMIT does not count: it is never run again whatever the attempts (the lab's
/// transactions are not idempotent).
fn still_lost(reports: &[RunReport]) -> impl Iterator<Item = String> + '_ {
    let exhausted = |r: &RunReport| {
        r.failed
            - r.failed_by_kind
                .get(crate::stats::AMBIGUOUS)
                .copied()
                .unwrap_or(0)
    };
    reports
        .iter()
        .filter(move |r| r.policy != "none" && exhausted(r) > 0 && r.retries > 0)
        .map(move |r| {
            format!(
                "note: {} still lost {}: {} ran out under this contention (a growing backoff spreads the retries out)",
                r.policy,
                exhausted(r),
                r.policy_description
                    .split(',')
                    .next()
                    .unwrap_or(r.policy_description.as_str())
            )
        })
}
