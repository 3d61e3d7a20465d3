//! What txretry-lab and txretry-bench print, as their tests read it: stdout and stderr as
//! text, the runs of a `--json` report, and the shape every run object has.

use std::process::Output;

/// stdout and stderr as text.
pub fn texts(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Parses `--json` output: stdout must hold exactly one JSON array.
pub fn json_runs(output: &Output) -> Vec<serde_json::Value> {
    let (stdout, stderr) = texts(output);
    let value: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("stdout is not one JSON value ({e}):\n{stdout}\nstderr:\n{stderr}")
    });
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .clone()
}

/// Checks the shape every run object has, and that its numbers agree with each other.
pub fn check_run_shape(run: &serde_json::Value, workers: u64) {
    for key in [
        "policy",
        "db",
        "workload",
        "isolation",
        "duration_s",
        "workers",
        "committed",
        "business_failed",
        "failed",
        "attempts",
        "tps",
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "retries_by_kind",
        "retries_per_commit",
        "invariant_ok",
    ] {
        assert!(run.get(key).is_some(), "{key} missing in {run}");
    }
    let n = |key: &str| {
        run[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} is not a count in {run}"))
    };
    assert_eq!(n("workers"), workers);
    let (committed, business, failed, cut_short, attempts) = (
        n("committed"),
        n("business_failed"),
        n("failed"),
        n("cut_short"),
        n("attempts"),
    );
    assert!(committed > 0, "nothing committed: {run}");
    let by_kind = run["retries_by_kind"]
        .as_object()
        .expect("retries_by_kind is an object");
    for kind in ["deadlock", "lock_timeout", "serialization_failure", "busy"] {
        assert!(
            by_kind.get(kind).and_then(|v| v.as_u64()).is_some(),
            "retries_by_kind.{kind} missing: {run}"
        );
    }
    let retries: u64 = by_kind.values().filter_map(|v| v.as_u64()).sum();
    // Every transaction's first attempt and every retry, whether or not it reached the
    // transaction's body.
    assert_eq!(
        attempts,
        committed + business + failed + cut_short + retries,
        "{run}"
    );
    assert!(run["tps"].as_f64().is_some_and(|t| t > 0.0), "{run}");
    let (p50, p95, p99) = (
        run["p50_ms"].as_f64(),
        run["p95_ms"].as_f64(),
        run["p99_ms"].as_f64(),
    );
    assert!(p50.is_some() && p95.is_some() && p99.is_some(), "{run}");
    assert!(p50 <= p95 && p95 <= p99, "{run}");
}

/// The preset names `--policy all` runs, in order.
pub const PRESETS: [&str; 7] = [
    "none",
    "default",
    "immediate",
    "exp-jitter",
    "contention",
    "database",
    "adaptive",
];
