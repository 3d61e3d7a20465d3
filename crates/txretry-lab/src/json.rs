//! `--json`: one JSON array on stdout, an object per run (see [`RunReport`]).

use crate::report::RunReport;

/// The array of every run's report, pretty-printed.
pub fn render(reports: &[RunReport]) -> String {
    // Serializing plain structs of numbers, strings and maps cannot fail; should it ever,
    // say so in valid JSON rather than panic.
    serde_json::to_string_pretty(reports).unwrap_or_else(|e| {
        serde_json::json!({ "error": format!("could not serialize the report: {e}") }).to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::Preset;
    use crate::report::Setup;
    use crate::run::RunResult;
    use crate::stats::{RetryCounter, Tally};
    use crate::workload::Invariant;
    use std::time::Duration;

    #[test]
    fn shape() {
        let setup = Setup {
            db: "postgres://u:***@h/db".into(),
            engine: "postgres",
            workload: "hot-rows",
            isolation: "repeatable-read".into(),
            sqlite_begin: None,
            rows: 4,
            workers: 2,
            processes: 1,
            duration: Duration::from_secs(1),
        };
        let retries = RetryCounter::default();
        retries.record(Some(txretry::TransientKind::SerializationFailure));
        let result = RunResult {
            preset: Preset::ExpJitter,
            tally: Tally {
                committed: 2,
                attempts: 3,
                latencies_us: vec![1500, 2500],
                ..Tally::default()
            },
            retries,
            elapsed: Duration::from_secs(1),
            invariant: Invariant {
                counts: None,
                ok: true,
                detail: "fine".into(),
            },
            interrupted: false,
            committed_by_process: Vec::new(),
            faults: Vec::new(),
        };
        let text = render(&[RunReport::new(&setup, result)]);
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let run = &value[0];
        for key in [
            "policy",
            "workers",
            "processes",
            "committed",
            "failed",
            "business_failed",
            "attempts",
            "tps",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "retries_by_kind",
            "retries_per_commit",
            "invariant_ok",
            "db",
            "workload",
            "isolation",
            "duration_s",
        ] {
            assert!(run.get(key).is_some(), "missing {key}");
        }
        assert_eq!(run["policy"], "exp-jitter");
        assert_eq!(run["attempts"], 3);
        assert_eq!(run["retries_by_kind"]["serialization_failure"], 1);
        assert_eq!(run["retries_per_commit"], 0.5);
        assert_eq!(run["tps"], 2.0);
        assert_eq!(run["p50_ms"], 1.5);
        assert_eq!(run["invariant_ok"], true);
        assert_eq!(run["sqlite_begin"], serde_json::Value::Null);
    }
}
