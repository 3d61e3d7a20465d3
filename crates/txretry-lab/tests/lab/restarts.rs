//! The server restarts in the middle of a lab run: a Postgres and a MariaDB container of
//! the test's own (txretry-testkit's `RestartableServer`), restarted once the run is
//! committing. The lab must keep going once the server is back, count the transactions
//! the restart broke as `connection` or `failover` failures (Postgres' `57P01`; never as
//! permanent ones), commit again
//! afterwards, and exit 0 with its invariant intact: nothing lost, nothing written twice.
//!
//! Ignored by the plain test run (it needs Docker); `.ci/containers` runs it with
//! `--include-ignored` and `TXRETRY_REQUIRE_RESTARTS=1`.

use std::process::Stdio;

use sqlx::{AssertSqlSafe, Connection};
use txretry_testkit::RestartableServer;
use txretry_testkit::wait::{poll_until, within};

use crate::{json_runs, texts};

/// Rows in `table`, or `None` when it cannot be read (not created yet, already dropped,
/// or the server is away). A new session each time: the server restarts in between.
async fn rows(url: &str, table: &str) -> Option<i64> {
    // The name is the lab's own (`txlab_`, digits, `_`), built by this test.
    let count = AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}"));
    if url.starts_with("postgres") {
        let mut conn = sqlx::PgConnection::connect(url).await.ok()?;
        let n = sqlx::query_scalar(count).fetch_one(&mut conn).await.ok();
        let _ = conn.close().await;
        n
    } else {
        let mut conn = sqlx::MySqlConnection::connect(url).await.ok()?;
        let n = sqlx::query_scalar(count).fetch_one(&mut conn).await.ok();
        let _ = conn.close().await;
        n
    }
}

/// Runs the lab (transfer, 4 workers, 10 s, the default policy) against `server`, restarts
/// the server once the ledger has rows, waits for a commit after the restart, and checks
/// the report.
async fn lab_across_a_restart(server: &RestartableServer) {
    let url = server.url();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_txretry-lab"))
        .args([
            "--db",
            url,
            "--workers",
            "4",
            "--duration",
            "10s",
            "--json",
            "--policy",
            "default",
        ])
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the txretry-lab binary runs");
    // The lab names its tables txlab_<its pid>_<run>_…; this is its only run.
    let ledger = format!("txlab_{}_0_ledger", child.id().expect("a running child"));

    poll_until("the lab never committed a transfer", async || {
        rows(url, &ledger).await.is_some_and(|n| n > 0)
    })
    .await;
    server.restart().await;
    let after_restart = rows(url, &ledger)
        .await
        .expect("the ledger survives a clean restart");
    poll_until("the lab committed nothing after the restart", async || {
        rows(url, &ledger).await.is_some_and(|n| n > after_restart)
    })
    .await;

    let output = within(child.wait_with_output())
        .await
        .expect("the lab ran to the end");
    let (_, stderr) = texts(&output);
    assert_eq!(output.status.code(), Some(0), "stderr:\n{stderr}");
    let runs = json_runs(&output);
    let run = &runs[0];
    eprintln!("lab across a restart of {url}: {run}");
    assert_eq!(run["invariant_ok"], true, "{run}");
    assert!(run["committed"].as_u64().is_some_and(|n| n > 0), "{run}");
    let failed = &run["failed_by_kind"];
    let lost_sessions: u64 = ["connection", "failover"]
        .iter()
        .filter_map(|kind| failed[kind].as_u64())
        .sum();
    assert!(
        lost_sessions > 0,
        "the restart broke transactions, counted under `connection` or `failover`: {run}"
    );
    assert!(
        failed.get("permanent").is_none(),
        "a restart is not a permanent failure: {run}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a restartable container: .ci/containers runs it"]
async fn postgres_restart_mid_run() {
    let Some(server) = RestartableServer::postgres("lab_restarts::postgres").await else {
        return;
    };
    lab_across_a_restart(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a restartable container: .ci/containers runs it"]
async fn mariadb_restart_mid_run() {
    let Some(server) = RestartableServer::mariadb("lab_restarts::mariadb").await else {
        return;
    };
    lab_across_a_restart(&server).await;
}
