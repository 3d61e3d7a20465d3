//! `--processes N`: N child processes against one set of tables, one aggregated report,
//! one invariant check.

use crate::{check_run_shape, json_runs, run, texts};

/// Checks a `--processes` run: one run object, its processes' commits add up, each
/// process committed, and the single invariant check over the shared tables held.
fn check_shared_run(
    output: &std::process::Output,
    processes: u64,
    workers: u64,
) -> serde_json::Value {
    let (_, stderr) = texts(output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let runs = json_runs(output);
    assert_eq!(runs.len(), 1, "one aggregated report: {runs:?}");
    let run = runs.into_iter().next().expect("one run");
    check_run_shape(&run, workers);
    assert_eq!(run["processes"], processes, "{run}");
    let each: Vec<u64> = run["committed_by_process"]
        .as_array()
        .unwrap_or_else(|| panic!("committed_by_process missing: {run}"))
        .iter()
        .map(|n| n.as_u64().expect("a count"))
        .collect();
    assert_eq!(each.len() as u64, processes, "{run}");
    assert!(
        each.iter().all(|&n| n > 0),
        "a process committed nothing: {run}"
    );
    assert_eq!(
        each.iter().sum::<u64>(),
        run["committed"].as_u64().unwrap(),
        "{run}"
    );
    // One check over the shared tables, against every process's commits: the ledger holds
    // exactly the transfers all processes committed (ids unique across processes).
    assert_eq!(run["invariant_ok"], true, "{run}");
    let ledger_rows = format!("{} ledger rows", run["committed"]);
    assert!(
        run["invariant"]
            .as_str()
            .unwrap_or_default()
            .contains(&ledger_rows),
        "{run}"
    );
    assert_eq!(run["failed"], 0, "{run}");
    run
}

#[test]
fn two_processes_share_one_postgres_bank() {
    let Some(url) = txretry_testkit::postgres_url("lab_postgres_two_processes") else {
        return;
    };
    let output = run(&[
        "--db",
        &url,
        "--processes",
        "2",
        "--workers",
        "4",
        "--duration",
        "1s",
        "--json",
        "--policy",
        "database",
    ]);
    let run = check_shared_run(&output, 2, 4);
    assert_eq!(run["policy"], "database");
    // Database locks per key: transactions on the same accounts took turns across both
    // processes, so none collided.
    assert_eq!(run["retries"], 0, "{run}");
}

/// `--db` listing several Postgres servers: process `i` connects to server `i` mod their
/// number, as on MySQL (the Postgres children were all handed the first). The second
/// server here names a database that does not exist, so only its child can fail.
#[test]
fn each_process_connects_to_its_own_postgres_server() {
    let Some(url) = txretry_testkit::postgres_url("lab_postgres_servers_per_process") else {
        return;
    };
    let (base, _) = url.rsplit_once('/').expect("a URL with a database");
    let missing = format!("{base}/txretry_bench_no_such_database");
    let output = run(&[
        "--db",
        &format!("{url},{missing}"),
        "--processes",
        "2",
        "--workers",
        "1",
        "--duration",
        "1s",
        "--json",
    ]);
    let (_, stderr) = texts(&output);
    assert_eq!(
        output.status.code(),
        Some(2),
        "stderr:
{stderr}"
    );
    assert!(stderr.contains("child process 2 of 2"), "{stderr}");
    assert!(
        stderr.contains("txretry_bench_no_such_database"),
        "{stderr}"
    );
}

#[test]
fn two_processes_share_one_sqlite_file() {
    let output = run(&[
        "--processes",
        "2",
        "--workers",
        "2",
        "--duration",
        "1s",
        "--json",
        "--policy",
        "contention",
    ]);
    let run = check_shared_run(&output, 2, 2);
    assert_eq!(run["db"], "sqlite (temp file)");
}

#[test]
fn several_processes_print_one_human_report() {
    let output = run(&[
        "--processes",
        "2",
        "--workers",
        "2",
        "--duration",
        "500ms",
        "--policy",
        "exp-jitter",
    ]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(stdout.contains("2 processes x 2 workers"), "{stdout}");
    assert_eq!(stdout.matches("invariant").count(), 1, "{stdout}");
    assert!(stdout.contains("by process"), "{stdout}");
}

/// Runs `txretry-bench run` with `args` and `TXRETRY_BENCH_FAIL_CHILD=fail`.
fn run_with_failing_child(args: &[&str], fail: &str) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_txretry-bench"))
        .arg("run")
        .args(args)
        .env("NO_COLOR", "1")
        .env("TXRETRY_BENCH_FAIL_CHILD", fail)
        .output()
        .expect("the txretry-bench binary runs")
}

#[test]
fn a_child_that_fails_fails_the_run() {
    let args = [
        "--processes",
        "3",
        "--workers",
        "2",
        "--duration",
        "2s",
        "--json",
        "--policy",
        "contention",
    ];
    for (fail, when) in [
        ("1", "before it was ready"),
        ("2:run", "exited with code 3"),
    ] {
        let output = run_with_failing_child(&args, fail);
        let (stdout, stderr) = texts(&output);
        assert_eq!(output.status.code(), Some(2), "{fail}: stderr:\n{stderr}");
        assert!(stdout.is_empty(), "{fail}: no report: {stdout}");
        let which = format!(
            "child process {} of 3",
            fail[..1].parse::<u32>().unwrap() + 1
        );
        assert!(stderr.contains(&which), "{fail}: {stderr}");
        assert!(stderr.contains(when), "{fail}: {stderr}");
        // The child's own words are repeated.
        assert!(
            stderr.contains("as TXRETRY_BENCH_FAIL_CHILD asks"),
            "{fail}: {stderr}"
        );
    }
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_every_child_and_still_reports() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut parent = Command::new(env!("CARGO_BIN_EXE_txretry-bench"))
        .args([
            "run",
            "--processes",
            "2",
            "--workers",
            "2",
            "--duration",
            "10m",
            "--json",
            "--policy",
            "contention",
        ])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the txretry-bench binary runs");
    // Let the children start (if they have not, the run stops before it starts: exit 130
    // with no run, which the assertions below reject, so the test says so).
    std::thread::sleep(std::time::Duration::from_secs(2));
    let sent = Command::new("kill")
        .args(["-INT", &parent.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    // Without the relay the children would run for 10 minutes: give up after 2.
    let mut waited = 0;
    let status = loop {
        if let Some(status) = parent.try_wait().expect("the lab can be waited for") {
            break status;
        }
        if waited > 1200 {
            let _ = parent.kill();
            panic!("the lab did not stop within 2 minutes of Ctrl-C");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        waited += 1;
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    parent
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    parent
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(130), "stderr:\n{stderr}");
    let runs: Vec<serde_json::Value> =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert_eq!(runs.len(), 1, "{stdout}\n{stderr}");
    assert_eq!(runs[0]["interrupted"], true, "{}", runs[0]);
    assert_eq!(runs[0]["invariant_ok"], true, "{}", runs[0]);
    assert!(
        runs[0]["elapsed_s"].as_f64().unwrap() < 600.0,
        "{}",
        runs[0]
    );
}

#[test]
fn processes_out_of_range() {
    for (args, expected) in [
        (&["--processes", "0"][..], "from 1 to 64"),
        (&["--processes", "65"], "from 1 to 64"),
        (&[], "--processes"),
    ] {
        let output = run(args);
        let (stdout, stderr) = texts(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: stderr:\n{stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(
            stderr.contains(expected),
            "{args:?}: {expected:?} missing in:\n{stderr}"
        );
    }
}

#[test]
fn several_processes_cannot_share_an_in_memory_database() {
    let output = run(&[
        "--db",
        "sqlite::memory:",
        "--processes",
        "2",
        "--duration",
        "200ms",
    ]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("in-memory"), "{stderr}");
}

#[test]
fn the_child_flag_is_internal() {
    // Without the parent's handover it refuses to run, and touches nothing.
    let output = run(&["--child-tables", "txlab_1_0", "--duration", "200ms"]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("internal to --processes"), "{stderr}");
}
