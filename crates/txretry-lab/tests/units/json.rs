//! `src/json.rs`.

use std::time::Duration;
use txretry_lab::json::*;
use txretry_lab::presets::Preset;
use txretry_lab::report::RunReport;
use txretry_lab::report::Setup;
use txretry_lab::run::{Measured, RunResult};
use txretry_lab::stats::{RetryCounter, Tally};
use txretry_lab::workload::Invariant;

fn setup() -> Setup {
    Setup {
        db: "postgres://u:***@h/db".into(),
        engine: "postgres",
        workload: "hot-rows",
        isolation: "repeatable-read".into(),
        sqlite_begin: None,
        rows: 4,
        workers: 2,
        processes: 1,
        duration: Duration::from_secs(1),
    }
}

fn result(retries: RetryCounter, invariant: Invariant) -> RunResult {
    let tally = Tally {
        committed: 2,
        attempts: 3,
        latencies: [1500, 2500].into_iter().collect(),
        ..Tally::default()
    };
    let measured = Measured {
        tally,
        retries,
        elapsed: Duration::from_secs(1),
        ..Measured::default()
    };
    RunResult::new(Preset::ExpJitter, measured, invariant)
}

#[test]
fn shape() {
    let setup = setup();
    let retries = RetryCounter::default();
    retries.record(Some(txretry::TransientKind::SerializationFailure));
    let result = result(retries, Invariant::passed("fine".into()));
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

#[test]
fn an_appendix_joins_the_json_and_the_text_scrubbed_and_history_counts() {
    use txretry_lab::report::{Appendix, appendix_text};
    use txretry_lab::workload::check_history;
    let mut faulted = result(
        RetryCounter::default(),
        check_history(&[1, 2], &[1, 2], &[], 5452),
    );
    let mut json = serde_json::Map::new();
    json.insert(
        "faults".into(),
        serde_json::json!([{ "extra_ms": 200, "error": "no route to u:hunter2@h" }]),
    );
    faulted.appendix = Some(Appendix {
        json,
        text: "  #1 switchover as u:hunter2@h saw it\n".into(),
        hint: None,
        in_flight: "a fault",
    });
    let target = txretry_lab::target::Target::parse("postgres://u:hunter2@h/db").expect("a URL");
    let report = RunReport::new(&setup(), faulted).scrubbed(&target);
    let value: serde_json::Value =
        serde_json::from_str(&render(std::slice::from_ref(&report))).expect("valid JSON");
    assert_eq!(value[0]["history"]["lost"], 0);
    assert_eq!(value[0]["faults"][0]["extra_ms"], 200);
    let rendered = render(std::slice::from_ref(&report));
    assert!(!rendered.contains("hunter2"), "{rendered}");
    assert!(appendix_text(&report).contains("#1 switchover"));
    assert!(!appendix_text(&report).contains("hunter2"));
    // A run with nothing beside it appends nothing, and its JSON has neither key.
    let plain = RunReport::new(
        &setup(),
        result(RetryCounter::default(), Invariant::passed("fine".into())),
    );
    assert_eq!(appendix_text(&plain), "");
    let value: serde_json::Value = serde_json::from_str(&render(&[plain])).expect("valid JSON");
    assert!(value[0].get("history").is_none() && value[0].get("faults").is_none());
}
