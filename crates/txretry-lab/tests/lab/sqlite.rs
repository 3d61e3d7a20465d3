//! The embedded SQLite runs: nothing to set up, so these always run.

use crate::{PRESETS, check_run_shape, json_runs, lab, texts};

#[test]
fn every_preset_keeps_the_bank_consistent() {
    let output = lab(&["--duration", "1s", "--json", "--policy", "all"]);
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let runs = json_runs(&output);
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["policy"].as_str().expect("policy is a name"))
        .collect();
    assert_eq!(names, PRESETS);
    for run in &runs {
        check_run_shape(run, 4);
        assert_eq!(run["invariant_ok"], true, "{run}");
        assert_eq!(run["workload"], "transfer");
        assert_eq!(run["db"], "sqlite (temp file)");
        assert_eq!(run["duration_s"], 1.0);
    }
}

#[test]
fn hot_rows_with_deferred_begins_stay_exact() {
    // DEFERRED transactions that read and then write collide (SQLITE_BUSY_SNAPSHOT), which
    // no busy timeout cures: only retrying the whole transaction does. Whether they collide
    // in one second depends on timing, so only the outcome is asserted.
    let output = lab(&[
        "--workload",
        "hot-rows",
        "--rows",
        "2",
        "--workers",
        "4",
        "--sqlite-begin",
        "deferred",
        "--duration",
        "1s",
        "--json",
        "--policy",
        "exp-jitter",
    ]);
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let runs = json_runs(&output);
    assert_eq!(runs.len(), 1);
    check_run_shape(&runs[0], 4);
    assert_eq!(runs[0]["invariant_ok"], true, "{}", runs[0]);
    assert_eq!(runs[0]["sqlite_begin"], "deferred");
}

#[test]
fn the_first_run_demo_prints_every_number_in_words() {
    let output = lab(&["--duration", "1s"]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    for needle in [
        "committed",
        "tx/s",
        "business failures",
        "failed",
        "attempts",
        "per commit",
        "retries",
        "p50",
        "p95",
        "p99",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("invariant") && l.contains(" OK ")),
        "{stdout}"
    );
}

#[test]
fn isolation_is_ignored_on_sqlite_and_says_so() {
    let output = lab(&[
        "--duration",
        "200ms",
        "--isolation",
        "read-committed",
        "--json",
    ]);
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(stderr.contains("ignored on SQLite"), "{stderr}");
    assert_eq!(json_runs(&output)[0]["isolation"], "serializable");
}
