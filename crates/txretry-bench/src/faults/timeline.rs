//! The timeline of each fault of a `--fault` run, from what the application saw (every
//! failed attempt, with its time and kind; every acknowledged commit, with its time and
//! the port of the node it landed on) and what the cluster script said (when the fault
//! struck, when the new leader first took a write through the proxy).
//!
//! For fault i, the window runs from its request to the next fault's request (the last
//! one's, to the end of the run). In it:
//! - *first failure*: the first failed attempt (retried or not) at or after the request;
//! - *first commit on the new primary*: the first acknowledged commit at or after the
//!   fault that landed on a node other than the old leader;
//! - *app outage* = first commit on the new primary − fault; *cluster* = writable −
//!   fault (the script's own probe: no client can do better); *extra* = their difference;
//! - retries and failures by kind.

use std::collections::BTreeMap;

use serde::Serialize;
use txretry_lab::events::{Commit, Failure};

use super::inject::Injected;

/// One fault's timeline, as the report holds it. Times are milliseconds after the fault
/// struck (the script's `fault_ms`); `null` where unknown.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FaultTimeline {
    /// `switchover` or `failover`.
    pub kind: &'static str,
    /// The old leader's node name.
    pub from: Option<String>,
    /// The new leader's node name.
    pub to: Option<String>,
    /// The old leader's port.
    pub old_port: Option<i64>,
    /// When the lab asked for the fault, seconds after the run started.
    pub requested_at_s: f64,
    /// From the request to the fault (the script first checks the cluster is healthy).
    pub fault_after_request_ms: Option<i64>,
    /// The application's first failed attempt (negative: before the fault struck).
    pub first_failure_ms: Option<i64>,
    /// The first acknowledged commit on a node other than the old leader: the write
    /// outage the application saw.
    pub first_commit_on_new_primary_ms: Option<i64>,
    /// The port that commit landed on.
    pub new_primary_port: Option<i64>,
    /// When the new leader took the script's probe write through the proxy: the
    /// cluster's own promotion time.
    pub cluster_writable_ms: Option<i64>,
    /// What the application added over the cluster: app outage − cluster.
    pub extra_ms: Option<i64>,
    /// How long the script ran (it returns once the old leader rejoined).
    pub command_ms: i64,
    /// Retries in this fault's window, by kind.
    pub retries_by_kind: BTreeMap<String, u64>,
    /// Calls that failed in this fault's window, by verdict.
    pub failed_by_kind: BTreeMap<String, u64>,
    /// Why the fault could not be injected or read, if so.
    pub error: Option<String>,
}

fn diff(a: u64, b: u64) -> i64 {
    i64::try_from(a).unwrap_or(i64::MAX) - i64::try_from(b).unwrap_or(i64::MAX)
}

/// The timeline of each fault, from the run's commits and failures; `started_ms` is when
/// the run started.
pub fn timelines(
    faults: &[Injected],
    commits: &[Commit],
    failures: &[Failure],
    started_ms: u64,
) -> Vec<FaultTimeline> {
    faults
        .iter()
        .enumerate()
        .map(|(i, fault)| {
            let start = fault.requested_ms;
            let end = faults.get(i + 1).map_or(u64::MAX, |next| next.requested_ms);
            let window = |at: u64| (start..end).contains(&at);
            let mut t = FaultTimeline {
                kind: fault.kind.as_str(),
                old_port: fault.old_port,
                requested_at_s: diff(start, started_ms) as f64 / 1000.0,
                command_ms: diff(fault.returned_ms, start),
                ..FaultTimeline::default()
            };
            for f in failures.iter().filter(|f| window(f.at_ms)) {
                let by_kind = if f.retried {
                    &mut t.retries_by_kind
                } else {
                    &mut t.failed_by_kind
                };
                *by_kind.entry(f.kind.clone()).or_default() += 1;
            }
            let first_failure = failures
                .iter()
                .filter(|f| window(f.at_ms))
                .map(|f| f.at_ms)
                .min();
            match &fault.result {
                Ok(p) => {
                    t.from = Some(p.from.clone());
                    t.to = Some(p.to.clone());
                    t.fault_after_request_ms = Some(diff(p.fault_ms, start));
                    t.cluster_writable_ms = Some(diff(p.writable_ms, p.fault_ms));
                    t.first_failure_ms = first_failure.map(|at| diff(at, p.fault_ms));
                    let first_new = commits
                        .iter()
                        .filter(|c| {
                            c.at_ms >= p.fault_ms && c.at_ms < end && Some(c.port) != fault.old_port
                        })
                        .min_by_key(|c| c.at_ms);
                    if fault.old_port.is_some()
                        && let Some(c) = first_new
                    {
                        let outage = diff(c.at_ms, p.fault_ms);
                        t.first_commit_on_new_primary_ms = Some(outage);
                        t.new_primary_port = Some(c.port);
                        t.extra_ms = Some(outage - diff(p.writable_ms, p.fault_ms));
                    }
                }
                Err(e) => {
                    t.error = Some(e.clone());
                    t.first_failure_ms = first_failure.map(|at| diff(at, start));
                }
            }
            t
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::FaultArg;
    use crate::faults::inject::Promotion;

    fn fault(requested: u64, fault_ms: u64, writable: u64, returned: u64) -> Injected {
        Injected {
            kind: FaultArg::Switchover,
            requested_ms: requested,
            returned_ms: returned,
            old_port: Some(5451),
            result: Ok(Promotion {
                from: "pg1".into(),
                to: "pg2".into(),
                fault_ms,
                writable_ms: writable,
            }),
        }
    }

    fn failure(at_ms: u64, kind: &str, retried: bool) -> Failure {
        Failure {
            at_ms,
            kind: kind.into(),
            retried,
        }
    }

    #[test]
    fn outage_is_from_the_fault_to_the_first_commit_elsewhere() {
        let faults = [fault(10_000, 10_300, 12_800, 18_000)];
        let commits = [
            Commit {
                at_ms: 10_200,
                port: 5451,
            },
            // The old leader still answered after the fault: not the new primary.
            Commit {
                at_ms: 10_400,
                port: 5451,
            },
            Commit {
                at_ms: 13_100,
                port: 5452,
            },
            Commit {
                at_ms: 13_050,
                port: 5452,
            },
        ];
        let failures = [
            failure(9_000, "deadlock", true), // before the request: not this fault's
            failure(10_500, "failover", true),
            failure(11_000, "connection", true),
            failure(11_500, "connection", true),
            failure(12_000, "ambiguous", false),
        ];
        let t = &timelines(&faults, &commits, &failures, 5_000)[0];
        assert_eq!(t.requested_at_s, 5.0);
        assert_eq!(t.fault_after_request_ms, Some(300));
        assert_eq!(t.first_failure_ms, Some(200));
        assert_eq!(t.first_commit_on_new_primary_ms, Some(2_750));
        assert_eq!(t.new_primary_port, Some(5452));
        assert_eq!(t.cluster_writable_ms, Some(2_500));
        assert_eq!(t.extra_ms, Some(250));
        assert_eq!(t.command_ms, 8_000);
        assert_eq!(t.retries_by_kind["connection"], 2);
        assert_eq!(t.retries_by_kind["failover"], 1);
        assert!(!t.retries_by_kind.contains_key("deadlock"));
        assert_eq!(t.failed_by_kind["ambiguous"], 1);
    }

    #[test]
    fn each_fault_has_its_own_window_and_a_missing_commit_stays_unknown() {
        let faults = [
            fault(10_000, 10_100, 12_000, 15_000),
            fault(20_000, 20_100, 22_000, 25_000),
        ];
        // Only a commit in the second window; none on the new primary after the first.
        let commits = [Commit {
            at_ms: 23_000,
            port: 5452,
        }];
        let ts = timelines(&faults, &commits, &[], 0);
        assert_eq!(ts[0].first_commit_on_new_primary_ms, None);
        assert_eq!(ts[0].extra_ms, None);
        assert_eq!(ts[1].first_commit_on_new_primary_ms, Some(2_900));
    }

    #[test]
    fn a_failed_fault_says_why() {
        let mut f = fault(1_000, 0, 0, 1_500);
        f.result = Err("switchover refused".into());
        let t = &timelines(&[f], &[], &[failure(1_200, "connection", true)], 0)[0];
        assert_eq!(t.error.as_deref(), Some("switchover refused"));
        assert_eq!(t.first_failure_ms, Some(200));
        assert_eq!(t.cluster_writable_ms, None);
    }
}
