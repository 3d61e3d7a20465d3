//! `txretry-bench run --fault` against a Postgres HA cluster (`docker/ha/cluster`:
//! Patroni, etcd, three PostgreSQL nodes, HAProxy): one switchover during a 12 s history
//! run under the high-availability preset. Nothing may be lost or doubled (with asynchronous
//! replication a switchover loses nothing: Patroni waits for the candidate to catch up),
//! and the report has the fault's timeline: a commit on the new primary, the cluster's
//! own promotion time next to it.
//!
//! Run twice: through the proxy (HAProxy) and through the multi-host URL (the run then
//! opens a `PrimaryPool`, which follows the primary itself).
//!
//! The cluster comes from `TXRETRY_HA_PROXY_URL` / `TXRETRY_HA_MULTI_HOST_URL` (else
//! `docker/ha/cluster url`), the
//! script from `TXRETRY_HA_CLUSTER` (else the repository's); the TXRETRY_HA_* port and
//! state settings of a non-default cluster reach the script through the environment.
//! Ignored by the plain test run; with `TXRETRY_REQUIRE_HA=1` a missing cluster fails.

use std::process::{Command, Stdio};

use crate::{json_runs, texts};

/// The cluster script.
fn script() -> String {
    std::env::var("TXRETRY_HA_CLUSTER")
        .unwrap_or_else(|_| format!("{}/../../docker/ha/cluster", env!("CARGO_MANIFEST_DIR")))
}

/// One of the cluster's URLs (`env`, else the `prefix` line of `docker/ha/cluster url`),
/// or `None` (after saying SKIPPED) when there is no cluster.
fn cluster_url(test: &str, env: &str, prefix: &str) -> Option<String> {
    let url = std::env::var(env).ok().or_else(|| {
        let out = Command::new(script())
            .arg("url")
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|out| out.status.success())?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|url| url.trim().to_owned())
    });
    if url.is_none() {
        assert!(
            std::env::var("TXRETRY_REQUIRE_HA").as_deref() != Ok("1"),
            "{test}: no HA cluster (TXRETRY_REQUIRE_HA=1): run `docker/ha/cluster up` and set {env}"
        );
        eprintln!("SKIPPED {test}: no HA cluster (docker/ha/cluster up starts one)");
    }
    url
}

#[test]
#[ignore = "needs the HA cluster: .ci/run starts it"]
fn a_switchover_mid_run_through_the_proxy_loses_and_doubles_nothing() {
    if let Some(url) = cluster_url("bench::ha::proxy", "TXRETRY_HA_PROXY_URL", "proxy:") {
        switchover_mid_run(&url);
    }
}

#[test]
#[ignore = "needs the HA cluster: .ci/run starts it"]
fn a_switchover_mid_run_through_a_multi_host_url_loses_and_doubles_nothing() {
    if let Some(url) = cluster_url(
        "bench::ha::multi_host",
        "TXRETRY_HA_MULTI_HOST_URL",
        "multi-host:",
    ) {
        switchover_mid_run(&url);
    }
}

/// One run on the cluster at a time: two runs' switchovers would land in each other.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn switchover_mid_run(url: &str) {
    let _turn = TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cluster = script();
    let args = [
        "--db",
        url,
        "--workload",
        "history",
        "--policy",
        "high-availability",
        "--fault",
        "switchover",
        "--fault-every",
        "3s",
        "--duration",
        "12s",
        "--cluster",
        &cluster,
        "--json",
    ];
    let output = crate::run(&args);
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let runs = json_runs(&output);
    let run = &runs[0];
    eprintln!("a fault run on the HA cluster: {}", run["invariant"]);
    assert_eq!(run["policy"], "high-availability");
    assert_eq!(run["invariant_ok"], true, "{run}");
    let history = &run["history"];
    assert_eq!(history["lost"], 0, "{run}");
    assert_eq!(history["doubled"], 0, "{run}");
    assert_eq!(history["unknown"], 0, "{run}");
    assert!(
        history["acknowledged"].as_u64().is_some_and(|n| n > 0),
        "{run}"
    );
    // Only an ambiguous COMMIT may fail: the outage itself is ridden out.
    let failed = run["failed"].as_u64().expect("a count");
    let ambiguous = run["failed_by_kind"]["ambiguous"].as_u64().unwrap_or(0);
    assert_eq!(failed, ambiguous, "{run}");

    // The first switchover comes 3 s in; a second one may start before the 12 s are up
    // when the first command returned quickly. Each must show the same.
    let faults = run["faults"].as_array().expect("a timeline");
    assert!(!faults.is_empty(), "a switchover in 12 s: {run}");
    for fault in faults {
        assert_eq!(fault["kind"], "switchover");
        assert_eq!(fault["error"], serde_json::Value::Null, "{fault}");
        assert_ne!(fault["from"], fault["to"], "{fault}");
        let outage = fault["first_commit_on_new_primary_ms"]
            .as_i64()
            .unwrap_or_else(|| panic!("no commit on the new primary: {fault}"));
        let cluster_ms = fault["cluster_writable_ms"]
            .as_i64()
            .expect("the script's time");
        assert!(outage > 0 && cluster_ms > 0, "{fault}");
        assert_ne!(fault["new_primary_port"], fault["old_port"], "{fault}");
        assert!(fault["first_failure_ms"].as_i64().is_some(), "{fault}");
        eprintln!("the switchover's timeline: {fault:#}");
    }
}
