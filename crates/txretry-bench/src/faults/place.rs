//! [`Faulted`]: the lab's run in this process, with faults injected beside it and each
//! fault's timeline appended to its report.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::Pool;
use tokio::time::Instant;
use txretry::TransientKind;
use txretry_lab::backend::LabDb;
use txretry_lab::events::unix_ms;
use txretry_lab::lab::{Fatal, InProcess, Interrupts, Place};
use txretry_lab::presets::{HA_MAX_OUTAGE, Preset};
use txretry_lab::report::Appendix;
use txretry_lab::run::{RunResult, RunSpec};
use txretry_lab::target::Target;

use super::inject::{FaultPlan, inject_until};
use super::text;
use super::timeline::{FaultTimeline, timelines};

/// How long a worker waits for a pooled connection in a `--fault` run: short, so that a
/// connect refused during a failover comes back to the runner (whose failover budget does
/// the waiting, with short waits) instead of sqlx's own growing backoff.
pub const HA_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the invariant check is tried after faults: the cluster may still be handing
/// out connections of the old leader (the lab pauses half a second between tries).
const CHECK_TRIES: u32 = 20;

/// Each run in this process, as the lab's, with `plan`'s faults injected during it.
#[derive(Clone, Debug)]
pub struct Faulted {
    /// The faults, checked by [`FaultPlan::from_flags`].
    pub plan: FaultPlan,
}

impl Place for Faulted {
    fn processes(&self) -> usize {
        1
    }

    fn pool_size(&self, workers: usize) -> usize {
        InProcess.pool_size(workers)
    }

    fn connections(&self, workers: usize) -> (u64, String) {
        InProcess.connections(workers)
    }

    fn acquire_timeout(&self) -> Duration {
        HA_ACQUIRE_TIMEOUT
    }

    async fn run<DB: LabDb>(
        &self,
        pool: &Pool<DB>,
        target: &Target,
        db_url: &str,
        spec: &RunSpec,
        stop: &Arc<AtomicBool>,
        interrupts: &Interrupts,
    ) -> Result<Option<RunResult>, Fatal> {
        // Set while a fault's command runs: the workers go on past the deadline, and the
        // invariant check waits, until it returns.
        let in_flight = Arc::new(AtomicBool::new(false));
        let spec = RunSpec {
            timed: true,
            in_flight: Some(in_flight.clone()),
            check_tries: CHECK_TRIES,
            ..spec.clone()
        };
        // Ctrl-C stops the faults, and so does the end of the run: one that could not set
        // up its tables must not leave faults coming for the rest of `--duration`.
        let over = Arc::new(AtomicBool::new(false));
        let stopped = {
            let (stop, over) = (stop.clone(), over.clone());
            move || stop.load(Ordering::Relaxed) || over.load(Ordering::Relaxed)
        };
        let injector = tokio::spawn(inject_until(
            self.plan.clone(),
            Instant::now() + spec.duration,
            stopped,
            in_flight,
        ));
        let result = InProcess
            .run(pool, target, db_url, &spec, stop, interrupts)
            .await;
        over.store(true, Ordering::Relaxed);
        // Even a failed or quit run waits for the fault in flight: a script killed halfway
        // would leave the cluster without its old leader.
        let injected = injector.await.unwrap_or_default();
        let Some(mut result) = result? else {
            return Ok(None);
        };
        let faults = timelines(
            &injected,
            &result.measured.tally.commits,
            &result.measured.failures,
            unix_ms(result.measured.started),
        );
        result.appendix = Some(appendix(&result, &faults));
        Ok(Some(result))
    }
}

/// The report's part of a fault run: the timelines (JSON key `faults`, and text), and a
/// hint when the policy let the outages' failures surface.
fn appendix(result: &RunResult, faults: &[FaultTimeline]) -> Appendix {
    let mut json = serde_json::Map::new();
    json.insert(
        "faults".to_owned(),
        serde_json::to_value(faults).unwrap_or_default(),
    );
    let outage = [TransientKind::Failover, TransientKind::Connection];
    let surfaced = outage.iter().any(|k| {
        result
            .measured
            .tally
            .failed_by_kind
            .get(k.as_str())
            .is_some_and(|&n| n > 0)
    });
    let hint = surfaced.then(|| {
        let policy = result.preset.name();
        let budget = HA_MAX_OUTAGE.as_secs();
        if result.preset == Preset::HighAvailability {
            // It retries them: what surfaced outlasted its failover budget.
            format!(
                "hint: {policy}: failover and connection failures surfaced during the faults: \
                 an outage outlasted the policy's failover budget ({budget}s)"
            )
        } else {
            format!(
                "hint: {policy}: failover and connection failures surfaced during the faults: this policy does not retry them;\n      \
                 --policy high-availability rides an outage out (up to {budget}s, waits of 50ms doubling to 500ms)"
            )
        }
    });
    Appendix {
        json,
        text: text::faults(result, faults),
        hint,
        in_flight: "a fault (until its command returns)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use txretry_lab::run::Measured;
    use txretry_lab::stats::Tally;
    use txretry_lab::workload::check_history;

    fn result(failed: &[(&str, u64)]) -> RunResult {
        let tally = Tally {
            committed: 2,
            failed_by_kind: failed.iter().map(|&(k, n)| (k.to_owned(), n)).collect(),
            ..Tally::default()
        };
        let measured = Measured {
            tally,
            elapsed: Duration::from_secs(1),
            ..Measured::default()
        };
        let invariant = check_history(&[1, 2], &[1, 2], &[], 5452);
        RunResult::new(Preset::Default, measured, invariant)
    }

    fn timeline() -> FaultTimeline {
        FaultTimeline {
            kind: "switchover",
            from: Some("pg1".into()),
            to: Some("pg2".into()),
            old_port: Some(5451),
            first_failure_ms: Some(200),
            first_commit_on_new_primary_ms: Some(2_700),
            new_primary_port: Some(5452),
            cluster_writable_ms: Some(2_500),
            extra_ms: Some(200),
            ..FaultTimeline::default()
        }
    }

    #[test]
    fn the_timelines_go_into_the_json_and_the_text() {
        let a = appendix(&result(&[]), &[timeline()]);
        assert_eq!(a.json["faults"][0]["extra_ms"], 200);
        for says in [
            "faults under default",
            "#1 switchover pg1 -> pg2",
            "first commit on the new primary (port 5452) +2700 ms",
            "vs cluster 2500 ms (app adds +200 ms)",
            "lost 0, doubled 0",
        ] {
            assert!(a.text.contains(says), "{says:?} in:\n{}", a.text);
        }
        assert_eq!(a.hint, None);
        assert!(!a.in_flight.is_empty());
    }

    #[test]
    fn outage_failures_that_surfaced_get_a_hint_naming_the_policy() {
        let a = appendix(&result(&[("failover", 3)]), &[timeline()]);
        let hint = a.hint.expect("a hint");
        assert!(hint.contains("default:"), "{hint}");
        assert!(hint.contains("--policy high-availability"), "{hint}");
        assert!(
            appendix(&result(&[("deadlock", 1)]), &[timeline()])
                .hint
                .is_none()
        );
        // The high-availability preset retries them: what surfaced outlasted its budget,
        // and the hint does not send the reader to the preset that just ran.
        let ha = RunResult {
            preset: Preset::HighAvailability,
            ..result(&[("connection", 1)])
        };
        let hint = appendix(&ha, &[timeline()]).hint.expect("a hint");
        assert!(hint.contains("high-availability: "), "{hint}");
        assert!(
            hint.contains("outlasted the policy's failover budget (60s)"),
            "{hint}"
        );
        assert!(!hint.contains("does not retry"), "{hint}");
    }
}
