//! SIGTERM and Ctrl-C stop a stdio server whose host keeps its stdin open: the server must
//! not wait for a line that never comes (a supervisor that signals it, then waits, would
//! otherwise have to kill it). Nor for a database that went silent: closing its TLS
//! connections waits for an answer that never comes.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{BIN, Db, FreezableRelay, examples, with_query};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use tokio::process::Command;

/// Whether process `pid` has exited (gone, or a zombie its parent has not reaped).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

async fn stops_on(signal: &str) {
    let db = Db::sqlite().await;
    db.load("orders.sql").await;
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--config"])
        .arg(examples().join("orders.yaml"))
        .args(["--role", "support"])
        .env("ORDERS_DATABASE_URL", &db.url);
    stops(command, signal, || {}).await;
}

/// Starts `command`, a stdio server, then `before` the signal, then sends `signal`: it
/// must exit.
async fn stops(command: Command, signal: &str, before: impl FnOnce()) {
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = transport.id().unwrap();
    // Initialized: the server is serving, its signal handlers in place. The client holds
    // the server's stdin open from here on.
    let client = ().serve(transport).await.unwrap();
    before();
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .await
        .unwrap();
    assert!(sent.success(), "kill {signal}");
    // Guards against a hang, not timing assertions.
    let closed = tokio::time::timeout(Duration::from_secs(30), client.waiting()).await;
    assert!(closed.is_ok(), "still serving 30 s after {signal}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !exited(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running 30 s after {signal}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_stdio_server_whose_stdin_stays_open() {
    stops_on("-TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_a_stdio_server_whose_stdin_stays_open() {
    stops_on("-INT").await;
}

/// SIGTERM after the database went silent (the relay holds every byte, closes nothing), the
/// pool's connections on TLS: the server still exits, without closing them. A TLS close
/// waits for the server's answer, and the exit waited with it, for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_server_whose_database_went_silent() {
    let Some(db) = Db::postgres("signals::silent_database").await else {
        return;
    };
    let relay = FreezableRelay::start(&db.url).await;
    let config = db.write(
        "silent.yaml",
        r#"
sources:
  db: { url: "${SILENT_DB_URL}" }
tools:
  one:
    source: db
    description: One.
    statements:
      - sql: SELECT 1 AS one
    returns: row
"#,
    );
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--config"])
        .arg(config)
        .env("SILENT_DB_URL", with_query(&relay.url, "sslmode=require"));
    // Serving: the pool holds the connections `check` prepared the statement on.
    stops(command, "-TERM", || relay.freeze()).await;
}
