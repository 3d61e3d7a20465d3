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
fn the_first_run_shows_what_retrying_saves() {
    // The defaults, as a new user runs them: every preset side by side on DEFERRED SQLite
    // writers, which collide (SQLITE_BUSY) no matter the busy timeout.
    let output = lab(&["--json"]);
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let runs = json_runs(&output);
    let names: Vec<&str> = runs.iter().filter_map(|r| r["policy"].as_str()).collect();
    assert_eq!(names, PRESETS);
    for run in &runs {
        check_run_shape(run, 4);
        assert_eq!(run["invariant_ok"], true, "{run}");
        assert_eq!(run["sqlite_begin"], "deferred", "{run}");
    }
    // Without retries, transactions are lost to busy errors...
    assert!(
        runs[0]["failed_by_kind"]["busy"].as_u64() > Some(0),
        "{}",
        runs[0]
    );
    assert!(
        runs[0]["first_error_by_kind"]["busy"]
            .as_str()
            .is_some_and(|m| m.contains("locked")),
        "{}",
        runs[0]
    );
    // ...and the presets that retry with backoff lose none. (`default`, 2 attempts, and
    // `immediate`, 50 attempts without a wait, may lose a few: the report says so.)
    for run in &runs[3..] {
        assert_eq!(run["failed"], 0, "{run}");
        assert!(run["retries_by_kind"]["busy"].as_u64() > Some(0), "{run}");
    }
}

#[test]
fn the_table_explains_itself() {
    let output = lab(&["--duration", "300ms"]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    for needle in [
        "policy",
        "failed",
        "biz-fail",
        "committed: transactions that committed;",
        "failed: gave up with a database error (lost)",
        "first busy failure (none",
        "note: without retries",
        "4 workers",
    ] {
        assert!(stdout.contains(needle), "{needle:?} missing:\n{stdout}");
    }
    for policy in PRESETS {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(policy) && l.contains(" OK ")),
            "{policy} row missing:\n{stdout}"
        );
    }
}

#[test]
fn one_policy_prints_every_number_in_words() {
    let output = lab(&["--duration", "1s", "--policy", "none", "--workers", "1"]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    for needle in [
        "1 worker,",
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
        // One worker collides with nobody.
        "hint: nothing collided",
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
fn hot_rows_mentions_no_business_failures() {
    let output = lab(&[
        "--workload",
        "hot-rows",
        "--duration",
        "300ms",
        "--policy",
        "exp-jitter",
    ]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(!stdout.contains("business"), "{stdout}");
    assert!(!stdout.contains("insufficient"), "{stdout}");
}

#[test]
fn an_sqlite_file_that_cannot_be_opened_is_named_with_the_reason() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let missing = dir.path().join("no-such-dir").join("lab.db");
    let url = format!("sqlite://{}", missing.display());
    let output = lab(&["--db", &url, "--duration", "200ms"]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    let url = format!("sqlite://{}", dir.path().display());
    let (_, stderr) = texts(&lab(&["--db", &url, "--duration", "200ms"]));
    assert!(stderr.contains("it is a directory"), "{stderr}");
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
