//! The lab against a three-node Galera cluster (txretry-testkit's `galera_cluster`), one
//! node per process: `--db` lists the nodes and process `i` connects to node `i` mod 3.
//! Ignored by the plain run; `.ci/containers` runs it with `--include-ignored` and
//! `TXRETRY_REQUIRE_GALERA=1`.

use crate::{check_run_shape, json_runs, run, texts};

/// Transfers between a few accounts from three processes, each on its own node: writers
/// on different nodes conflict at certification, the exp-jitter policy retries every one
/// to a commit (the default policy's two attempts give up on a few per cent of them at
/// this contention), and the ledger still balances.
#[test]
#[ignore = "needs a Galera cluster: .ci/containers runs it"]
fn three_processes_on_three_galera_nodes_keep_the_invariant() {
    let Some(urls) = txretry_testkit::galera_cluster("lab_galera_three_nodes") else {
        return;
    };
    let output = run(&[
        "--db",
        &urls.join(","),
        "--processes",
        "3",
        "--workers",
        "4",
        "--duration",
        "3s",
        "--json",
        "--policy",
        "exp-jitter",
    ]);
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let runs = json_runs(&output);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    check_run_shape(run, 4);
    println!("{run}");
    assert_eq!(run["processes"], 3, "{run}");
    assert_eq!(run["invariant_ok"], true, "{run}");
    assert_eq!(
        run["failed"], 0,
        "every conflict was retried to a commit: {run}"
    );
    let by_process = run["committed_by_process"].as_array().expect("per process");
    assert!(
        by_process.iter().all(|n| n.as_u64() > Some(0)),
        "each node committed: {run}"
    );
    // Galera's conflicts surface as 1213, a deadlock to the classifier.
    assert!(
        run["retries_by_kind"]["deadlock"].as_u64() > Some(0),
        "{run}"
    );
}
