//! `txretry-bench sweep`: a short sweep on the embedded SQLite (table, JSON, plot), the
//! pgbench row on Postgres, bad input and Ctrl-C.

use std::path::Path;

use crate::{bench, texts};

/// The JSON document a `sweep --json` printed.
fn sweep_json(output: &std::process::Output) -> serde_json::Value {
    let (stdout, stderr) = texts(output);
    serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("stdout is not one JSON value ({e}):\n{stdout}\nstderr:\n{stderr}")
    })
}

/// Checks the plot in `path`: well-formed XML, an `svg` root, and in each of the two
/// panels one line per policy, in the policy's own colour, through as many points as the
/// policy has cells; and the panels' titles and axis label.
fn check_plot(path: &Path, policies: &[(&str, &str)], workers: usize) {
    let text = std::fs::read_to_string(path).expect("the plot was written");
    let doc = roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("the plot is not well-formed XML ({e}):\n{text}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    // The series are the only lines two pixels wide.
    let lines: Vec<roxmltree::Node> = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
        .collect();
    assert_eq!(lines.len(), 2 * policies.len(), "{text}");
    for (policy, colour) in policies {
        let mine: Vec<&roxmltree::Node> = lines
            .iter()
            .filter(|n| n.attribute("stroke") == Some(*colour))
            .collect();
        assert_eq!(mine.len(), 2, "one line per panel for {policy}");
        for line in mine {
            let points = line.attribute("points").unwrap_or_default().trim();
            assert_eq!(points.split(' ').count(), workers, "{policy}: {points}");
            for point in points.split(' ') {
                let (x, y) = point.split_once(',').expect("x,y");
                assert!(
                    x.parse::<f64>().is_ok() && y.parse::<f64>().is_ok(),
                    "{point}"
                );
            }
        }
    }
    for label in [
        "goodput",
        "retries per commit",
        "workers (log scale)",
        "none",
    ] {
        assert!(
            doc.descendants()
                .any(|n| n.has_tag_name("text") && n.text().map(str::trim) == Some(label)),
            "no {label:?} label"
        );
    }
}

#[test]
fn a_short_sweep_on_sqlite_prints_a_table_json_and_a_plot() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let plot = dir.path().join("sweep.svg");
    let plot_arg = plot.to_str().expect("a UTF-8 path");
    let common = [
        "sweep",
        "--duration",
        "150ms",
        "--workers",
        "2,1",
        "--policy",
        "none,exp-jitter",
        "--repeat",
        "2",
    ];
    let mut args = common.to_vec();
    args.extend(["--json", "--plot", plot_arg]);
    let output = bench(&args);
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    // The estimate comes first, before any run.
    let estimate = stderr
        .lines()
        .position(|l| l.contains("= 8 runs of 150ms") && l.contains("about"))
        .unwrap_or_else(|| panic!("no estimate:\n{stderr}"));
    let first_run = stderr
        .lines()
        .position(|l| l.starts_with("[1/8]"))
        .unwrap_or_else(|| panic!("no progress:\n{stderr}"));
    assert!(estimate < first_run, "{stderr}");
    assert!(
        stderr.contains("pgbench row skipped: the database is not Postgres"),
        "{stderr}"
    );

    let report = sweep_json(&output);
    assert_eq!(report["repeat"], 2);
    assert_eq!(report["spread"], "min-max");
    assert_eq!(report["workload"], "hot-rows");
    assert_eq!(report["db"], "sqlite (temp file)");
    assert_eq!(report["interrupted"], false);
    let cells = report["cells"].as_array().expect("cells");
    let keys: Vec<(String, u64)> = cells
        .iter()
        .map(|c| {
            (
                c["policy"].as_str().expect("policy").to_owned(),
                c["workers"].as_u64().expect("workers"),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = [
        ("none", 1),
        ("none", 2),
        ("exp-jitter", 1),
        ("exp-jitter", 2),
    ]
    .iter()
    .map(|(p, w)| ((*p).to_owned(), *w))
    .collect();
    assert_eq!(keys, expected);
    for cell in cells {
        let runs = cell["runs"].as_array().expect("runs");
        assert_eq!(runs.len(), 2, "{cell}");
        assert_eq!(cell["invariant_ok"], true, "{cell}");
        let goodputs: Vec<f64> = runs
            .iter()
            .map(|r| r["goodput"].as_f64().expect("goodput"))
            .collect();
        assert!(goodputs.iter().all(|&g| g > 0.0), "{cell}");
        let g = &cell["goodput"];
        let (median, min, max) = (
            g["median"].as_f64().expect("median"),
            g["min"].as_f64().expect("min"),
            g["max"].as_f64().expect("max"),
        );
        let lo = goodputs.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = goodputs.iter().copied().fold(0.0, f64::max);
        assert_eq!((min, max), (lo, hi), "{cell}");
        assert!((median - (lo + hi) / 2.0).abs() < 1e-9, "{cell}");
        for key in ["failed", "retries_per_commit", "p50_ms", "p99_ms"] {
            assert!(cell[key]["median"].as_f64().is_some(), "{key}: {cell}");
        }
        assert!(
            cell["goodput_pct_of_best_other"].as_f64().is_some(),
            "{cell}"
        );
        for run in runs {
            assert!(run["committed"].as_u64().is_some_and(|n| n > 0), "{run}");
            assert!(run["failed"].as_u64().is_some(), "{run}");
        }
    }
    check_plot(&plot, &[("none", "#D55E00"), ("exp-jitter", "#009E73")], 2);

    // The human table: a row per cell with its failures, and the legend under it.
    let output = bench(&common);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("txretry-bench sweep: hot-rows on sqlite (temp file)"),
        "{stdout}"
    );
    let header = lines[1];
    for column in [
        "policy",
        "workers",
        "goodput/s",
        "vs best",
        "failed",
        "retry/commit",
        "p50 ms",
        "p99 ms",
        "invariant",
    ] {
        assert!(header.contains(column), "{column} missing:\n{stdout}");
    }
    let rows: Vec<&str> = lines[3..7].to_vec();
    for (row, (policy, workers)) in rows.iter().zip(&expected) {
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(fields[0], policy, "{stdout}");
        assert_eq!(fields[1], workers.to_string(), "{stdout}");
        assert_eq!(fields.last(), Some(&"OK"), "{stdout}");
    }
    assert!(
        lines[7].starts_with("median of 2 runs per cell [min-max]"),
        "{stdout}"
    );
    assert!(
        lines[7].contains("failed: transactions per run"),
        "{stdout}"
    );
}

#[test]
fn the_pgbench_row_runs_next_to_the_presets_on_postgres() {
    let Some(url) = txretry_testkit::postgres_url("lab_sweep_pgbench") else {
        return;
    };
    let pgbench_installed = std::process::Command::new("pgbench")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let output = bench(&[
        "sweep",
        "--db",
        &url,
        "--duration",
        "1s",
        "--workers",
        "4",
        "--policy",
        "exp-jitter",
        "--repeat",
        "1",
        "--json",
    ]);
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let report = sweep_json(&output);
    let cells = report["cells"].as_array().expect("cells");
    assert_eq!(report["isolation"], "repeatable-read");
    if !pgbench_installed {
        // The row is skipped, and the output says why in one line.
        assert_eq!(report["pgbench_duration_s"], serde_json::Value::Null);
        assert!(stderr.contains("pgbench is not on PATH"), "{stderr}");
        eprintln!("lab_sweep_pgbench: pgbench is not installed; only its absence was checked");
        return;
    }
    assert_eq!(report["pgbench_duration_s"], 1);
    let pgbench = &cells[0];
    assert_eq!(pgbench["policy"], "pgbench", "{report}");
    assert_eq!(cells[1]["policy"], "exp-jitter", "{report}");
    let run = &pgbench["runs"][0];
    assert!(run["committed"].as_u64().is_some_and(|n| n > 0), "{run}");
    assert!(run["goodput"].as_f64().is_some_and(|g| g > 0.0), "{run}");
    // The counters' sum equals what pgbench says it committed.
    assert_eq!(run["invariant_ok"], true, "{run}");
    assert!(
        run["p50_ms"].as_f64().is_some() && run["p99_ms"].as_f64().is_some(),
        "{run}"
    );
}

/// Exit code 2, a message on stderr, nothing on stdout, and no run started.
fn assert_refused(args: &[&str], expected: &str) {
    let mut all = vec!["sweep", "--duration", "100ms"];
    all.extend_from_slice(args);
    let output = bench(&all);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(2), "{args:?}: stderr:\n{stderr}");
    assert!(stdout.is_empty(), "{args:?}: {stdout}");
    assert!(
        stderr.contains(expected),
        "{args:?}: {expected:?} missing in:\n{stderr}"
    );
    assert!(
        !stderr.contains("[1/"),
        "{args:?}: a run started:\n{stderr}"
    );
}

#[test]
fn bad_lists_and_counts_are_refused() {
    assert_refused(&["--workers", "0"], "comma-separated, e.g. 1,4,8,16,32");
    assert_refused(&["--workers", "a,b"], "got \"a,b\"");
    assert_refused(&["--repeat", "0"], "from 1 to 100");
    assert_refused(&["--policy", "none,fast"], "unknown policy \"fast\"");
    assert_refused(
        &["--workload", "transfer", "--rows", "1"],
        "--rows 2 or more",
    );
    assert_refused(
        &["--db", "oracle://h/db"],
        "unsupported database `oracle://`",
    );
}

#[test]
fn a_plot_that_cannot_be_written_is_refused_before_the_sweep() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let missing = dir.path().join("no-such-dir").join("sweep.svg");
    assert_refused(
        &["--plot", missing.to_str().expect("UTF-8")],
        "--plot: cannot write",
    );
    assert_refused(&["--plot", "sweep.png"], "must end in .svg");
}

#[test]
fn an_unreachable_server_leaves_no_plot_and_no_password() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let plot = dir.path().join("sweep.svg");
    // Port 1: nothing listens there, so this needs no server.
    let output = bench(&[
        "sweep",
        "--db",
        "postgres://alice:S3cret-sweep@127.0.0.1:1/test",
        "--duration",
        "100ms",
        "--plot",
        plot.to_str().expect("UTF-8"),
    ]);
    let (stdout, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("could not connect"), "{stderr}");
    assert!(stderr.contains("alice:***@127.0.0.1:1"), "{stderr}");
    assert!(!stderr.contains("S3cret"), "password leaked:\n{stderr}");
    assert!(!plot.exists(), "an empty plot was left behind");
}

#[test]
fn ctrl_c_reports_the_runs_so_far() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command, Stdio};

    let mut child = Command::new(env!("CARGO_BIN_EXE_txretry-bench"))
        .args([
            "sweep",
            "--duration",
            "300ms",
            "--workers",
            "1,2",
            "--policy",
            "none,immediate",
            "--repeat",
            "3",
            "--json",
        ])
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the txretry-bench binary runs");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    // Interrupt during the third run: two have finished.
    loop {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).expect("stderr is readable");
        assert!(n > 0, "the sweep ended before its third run:\n{seen}");
        seen.push_str(&line);
        if line.starts_with("[3/12]") {
            break;
        }
    }
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(interrupted.success());
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("stdout is readable");
    stderr
        .read_to_string(&mut seen)
        .expect("stderr is readable");
    let status = child.wait().expect("the sweep exits");
    assert_eq!(status.code(), Some(130), "stderr:\n{seen}");
    assert!(!seen.contains("[4/12]"), "the sweep went on:\n{seen}");
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{stdout}\n{seen}"));
    assert_eq!(report["interrupted"], true, "{report}");
    let runs: usize = report["cells"]
        .as_array()
        .expect("cells")
        .iter()
        .map(|c| c["runs"].as_array().map_or(0, Vec::len))
        .sum();
    // The two finished runs and the one cut short.
    assert_eq!(runs, 3, "{report}");
}
