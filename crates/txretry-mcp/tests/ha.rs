//! txretry-mcp on the Postgres HA cluster (`docker/ha/cluster`, see docker/README.md): a
//! source on the cluster's multi-host URL (a `PrimaryPool` that follows the primary) and one
//! on its proxy, `once` tools under a failover budget, calls running while Patroni switches
//! the leader over. Every call commits, exactly once, and calls commit on the new leader.
//! Ignored in the plain run (it needs the cluster); `.ci/run` runs it with the cluster up
//! (`TXRETRY_REQUIRE_HA=1`).

mod common;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{object, outcome_of, stdio, within};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, Connection, PgConnection};

fn script() -> String {
    format!("{}/../../docker/ha/cluster", env!("CARGO_MANIFEST_DIR"))
}

/// The cluster's proxy and multi-host URLs, or `None` (skipped) without a cluster.
async fn cluster() -> Option<(String, String)> {
    let from_env = (
        std::env::var("TXRETRY_HA_PROXY_URL").ok(),
        std::env::var("TXRETRY_HA_MULTI_HOST_URL").ok(),
    );
    let urls = match from_env {
        (Some(proxy), Some(multi)) => Some((proxy, multi)),
        _ => {
            let out = tokio::process::Command::new(script())
                .arg("url")
                .stderr(Stdio::null())
                .output()
                .await
                .ok()
                .filter(|out| out.status.success());
            out.and_then(|out| {
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let line = |prefix: &str| {
                    text.lines()
                        .find_map(|l| l.strip_prefix(prefix))
                        .map(|v| v.trim().to_owned())
                };
                Some((line("proxy:")?, line("multi-host:")?))
            })
        }
    };
    if urls.is_none() {
        assert!(
            std::env::var("TXRETRY_REQUIRE_HA").as_deref() != Ok("1"),
            "no HA cluster (TXRETRY_REQUIRE_HA=1): run `docker/ha/cluster up`"
        );
        eprintln!("SKIPPED ha: no HA cluster (docker/ha/cluster up starts one)");
    }
    urls
}

const CONFIG: &str = r#"
sources:
  following: { url: "${HA_MULTI_HOST_URL}", max_connections: 4 }
  proxied: { url: "${HA_PROXY_URL}", max_connections: 4 }
defaults:
  # Ride out the switchover: failover and lost connections are retried for up to 60 s.
  retry: { max_attempts: 5, failover: 60s }
tools:
  note_following:
    source: following
    description: Records a note on the primary, through the multi-host URL.
    parameters: { id: { type: string, min: 1, max: 64 } }
    statements:
      - sql: INSERT INTO TABLE_NAME (id, port) VALUES (:id, inet_server_port())
    once: { key: [id] }
    returns: { template: "noted {id}" }
  note_proxied:
    source: proxied
    description: Records a note on the primary, through the proxy.
    parameters: { id: { type: string, min: 1, max: 64 } }
    statements:
      - sql: INSERT INTO TABLE_NAME (id, port) VALUES (:id, inet_server_port())
    once: { key: [id] }
    returns: { template: "noted {id}" }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the HA cluster: docker/ha/cluster up"]
async fn calls_ride_out_a_switchover_and_commit_exactly_once() {
    let Some((proxy, multi_host)) = cluster().await else {
        return;
    };
    let table = format!("mcp_ha_notes_{}", std::process::id());
    let mut admin = PgConnection::connect(&proxy).await.expect("the proxy");
    sqlx::raw_sql(AssertSqlSafe(format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id TEXT NOT NULL, port INT NOT NULL)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    admin.close().await.ok();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ha.yaml");
    std::fs::write(&path, CONFIG.replace("TABLE_NAME", &table)).unwrap();
    let client = stdio(
        &path,
        &[],
        &[
            ("HA_MULTI_HOST_URL", multi_host.as_str()),
            ("HA_PROXY_URL", proxy.as_str()),
        ],
    )
    .await;

    // Four callers, two per source, calling until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicU64::new(0));
    let mut callers = tokio::task::JoinSet::new();
    for worker in 0..4 {
        let (peer, stop, next) = (client.peer().clone(), stop.clone(), next.clone());
        let tool = if worker % 2 == 0 {
            "note_following"
        } else {
            "note_proxied"
        };
        callers.spawn(async move {
            let mut answers: Vec<(String, Value)> = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                // Unique across runs too: the once records outlive a run.
                let id = format!(
                    "{}-{}",
                    std::process::id(),
                    next.fetch_add(1, Ordering::Relaxed)
                );
                let params =
                    CallToolRequestParams::new(tool).with_arguments(object(json!({ "id": id })));
                let result = peer.call_tool(params).await.expect("a result");
                answers.push((id, outcome_of(&result)));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            answers
        });
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let switched = tokio::process::Command::new(script())
        .arg("switchover")
        .stderr(Stdio::inherit())
        .output()
        .await
        .expect("docker/ha/cluster switchover");
    assert!(switched.status.success(), "{switched:?}");
    // Calls go on against the new leader for a while.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let mut answers = Vec::new();
    while let Some(joined) = within("the callers", callers.join_next()).await {
        answers.extend(joined.unwrap());
    }
    client.cancel().await.unwrap();

    // Every call committed, once.
    assert!(answers.len() > 20, "too few calls: {}", answers.len());
    for (id, outcome) in &answers {
        assert_eq!(outcome["status"], "committed", "{id}: {outcome}");
    }
    let mut conn = PgConnection::connect(&proxy).await.unwrap();
    let rows: Vec<(String, i32)> =
        sqlx::query_as(AssertSqlSafe(format!("SELECT id, port FROM {table}")))
            .fetch_all(&mut conn)
            .await
            .unwrap();
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for (id, _) in &rows {
        *seen.entry(id.as_str()).or_default() += 1;
    }
    for (id, _) in &answers {
        assert_eq!(seen.get(id.as_str()), Some(&1), "{id}: not exactly once");
    }
    assert_eq!(rows.len(), answers.len(), "nothing but the calls' rows");
    // The calls saw the switchover (some ran again) and wrote on more than one node.
    let ports: std::collections::HashSet<i32> = rows.iter().map(|(_, port)| *port).collect();
    assert!(ports.len() >= 2, "every row on one node: {ports:?}");
    let retried = answers
        .iter()
        .filter(|(_, outcome)| outcome["attempts"].as_u64() > Some(1))
        .count();
    eprintln!(
        "{} calls, {retried} ran more than once, on ports {ports:?}",
        answers.len()
    );
    assert!(retried >= 1, "no call was caught by the switchover");
    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE {table}")))
        .execute(&mut conn)
        .await
        .ok();
}
