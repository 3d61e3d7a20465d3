//! What the MCP server costs: the same tools called through `txretry-mcp serve` over stdio
//! (rmcp's client, one session, calls in flight at once) and through the Rust `Toolbox`
//! in-process, side by side in one run, on one Postgres database.
//!
//! ```sh
//! cargo bench -p txretry-mcp --bench overhead -- [SECONDS] [CONCURRENCY]
//! ```
//!
//! Two workloads: `get_order` (a read-only one-statement tool) and `transfer` (three
//! statements, `once`, on 4 hot accounts: calls queue on each other's row locks). After each run the ledger is checked: every committed transfer is there once,
//! nothing else is, and the balances still sum to the start (0 lost, 0 doubled).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use sqlx::{Connection, Executor, PgConnection};
use tokio::sync::Mutex;
use txretry_tool::Caller;
use txretry_tool::mcp::RetryRelay;

const DB: &str = "txretry_mcp_bench";

const CONFIG: &str = r#"
sources:
  shop: { url: "${BENCH_URL}", max_connections: 16 }
defaults:
  retry: { max_attempts: 20, backoff: exponential, initial_delay: 1ms, max_delay: 50ms, jitter: full }
tools:
  get_order:
    source: shop
    description: Look an order up.
    read_only: true
    parameters: { order_id: { type: integer } }
    statements:
      - sql: SELECT id, account, status, cents FROM orders WHERE id = :order_id
        expect: { rows: 1, error: "order {order_id} not found" }
    returns: row
  transfer:
    source: shop
    description: Move cents.
    parameters:
      from: { type: integer }
      to: { type: integer }
      cents: { type: integer, min: 1 }
      request_id: { type: string }
    statements:
      - sql: UPDATE accounts SET cents = cents - :cents WHERE id = :from
        expect: { rows: 1, error: "no account {from}" }
      - sql: UPDATE accounts SET cents = cents + :cents WHERE id = :to
        expect: { rows: 1, error: "no account {to}" }
      - sql: INSERT INTO ledger (request_id, from_account, to_account, cents) VALUES (:request_id, :from, :to, :cents)
    once: { key: [request_id] }
    returns: { template: "ok" }
"#;

const SETUP: &str = "
DROP TABLE IF EXISTS accounts, orders, ledger, txretry_tool_calls;
CREATE TABLE accounts (id BIGINT PRIMARY KEY, cents BIGINT NOT NULL);
CREATE TABLE orders (id BIGINT PRIMARY KEY, account BIGINT NOT NULL, status VARCHAR(16) NOT NULL, cents BIGINT NOT NULL);
CREATE TABLE ledger (request_id VARCHAR(64) PRIMARY KEY, from_account BIGINT NOT NULL, to_account BIGINT NOT NULL, cents BIGINT NOT NULL);
INSERT INTO accounts SELECT g, 1000000 FROM generate_series(1, 4) g;
INSERT INTO orders SELECT g, 1 + g % 4, 'open', g FROM generate_series(1, 100) g;
";

/// One side of the comparison: how a call is made.
#[derive(Clone)]
enum Via {
    Stdio(rmcp::Peer<rmcp::RoleClient>),
    Direct(txretry_tool::Toolbox),
}

impl Via {
    /// Calls a tool; whether it committed.
    async fn call(&self, tool: &str, args: Value, call_id: &str) -> bool {
        match self {
            Via::Stdio(peer) => {
                let Value::Object(args) = args else {
                    unreachable!()
                };
                let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
                match peer.call_tool(params).await {
                    Ok(result) => result.is_error != Some(true),
                    Err(_) => false,
                }
            }
            Via::Direct(toolbox) => toolbox
                .invoke(&Caller::new(Vec::<String>::new()), tool, args, call_id)
                .await
                .is_ok(),
        }
    }
}

struct Run {
    calls: u64,
    failed: u64,
    seconds: f64,
    latency: Histogram<u64>,
}

async fn run(via: Via, tool: &'static str, seconds: u64, concurrency: usize, tag: &str) -> Run {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let latency = Arc::new(Mutex::new(Histogram::<u64>::new(3).expect("histogram")));
    let next = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let (via, latency, next, failed) =
            (via.clone(), latency.clone(), next.clone(), failed.clone());
        let tag = tag.to_owned();
        workers.spawn(async move {
            let mut local = Histogram::<u64>::new(3).expect("histogram");
            while Instant::now() < deadline {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let args = if tool == "get_order" {
                    json!({ "order_id": 1 + n % 100 })
                } else {
                    // Hot rows, locked in ascending order: calls queue on each other's
                    // row locks (deadlocks would measure Postgres' deadlock_timeout).
                    let from = 1 + (n + worker as u64) % 3;
                    json!({ "from": from, "to": from + 1, "cents": 1, "request_id": format!("{tag}-{n}") })
                };
                let begun = Instant::now();
                if !via.call(tool, args, &format!("{tag}-{n}")).await {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                local.record(begun.elapsed().as_micros() as u64).ok();
            }
            latency.lock().await.add(&local).ok();
        });
    }
    while workers.join_next().await.is_some() {}
    let Ok(latency) = Arc::try_unwrap(latency) else {
        unreachable!("every worker has ended")
    };
    let latency = latency.into_inner();
    Run {
        calls: latency.len(),
        failed: failed.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
        latency,
    }
}

/// 0 lost, 0 doubled: the ledger holds one row per committed transfer and the money is
/// all there.
async fn check(url: &str, committed: u64) {
    let mut conn = PgConnection::connect(url).await.expect("connect");
    let (rows, sum): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM ledger), (SELECT sum(cents)::bigint FROM accounts)",
    )
    .fetch_one(&mut conn)
    .await
    .expect("check");
    assert_eq!(
        rows as u64, committed,
        "ledger rows against committed transfers"
    );
    assert_eq!(sum, 4_000_000, "the money is all there");
    conn.execute("TRUNCATE ledger, txretry_tool_calls; UPDATE accounts SET cents = 1000000")
        .await
        .expect("reset");
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let seconds: u64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(5);
    let concurrency: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(8);
    let base = std::env::var("TXRETRY_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let mut admin = PgConnection::connect(&base).await.expect("postgres");
    admin
        .execute(concat!(
            "DROP DATABASE IF EXISTS ",
            "txretry_mcp_bench",
            " WITH (FORCE)"
        ))
        .await
        .expect("drop");
    admin
        .execute(concat!("CREATE DATABASE ", "txretry_mcp_bench"))
        .await
        .expect("create");
    let url = match base.rsplit_once('/') {
        Some((server, _)) => format!("{server}/{DB}"),
        None => unreachable!(),
    };
    PgConnection::connect(&url)
        .await
        .expect("bench db")
        .execute(SETUP)
        .await
        .expect("setup");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bench.yaml");
    std::fs::write(&path, CONFIG).expect("config");
    let path = path.to_str().expect("utf-8 path").to_owned();

    // The same config, in-process.
    let env_url = url.clone();
    let config = txretry_mcp::config::load(&path, &move |name| {
        (name == "BENCH_URL").then(|| env_url.clone())
    })
    .expect("config");
    let pools = txretry_mcp::check::open(&config).await.expect("pools");
    let toolbox =
        txretry_mcp::toolbox::build(&config, &pools, &RetryRelay::new()).expect("toolbox");

    // The server, over stdio.
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_txretry-mcp"));
    command
        .args(["serve", "--config", &path])
        .env("BENCH_URL", &url);
    let client =
        ().serve(TokioChildProcess::new(command).expect("spawn"))
            .await
            .expect("initialize");

    println!(
        "txretry-mcp overhead: {seconds} s per run, {concurrency} calls in flight, Postgres ({DB})"
    );
    println!(
        "{:<10} {:<7} {:>9} {:>8} {:>9} {:>9} {:>7}",
        "tool", "via", "calls/s", "failed", "p50 ms", "p99 ms", "ratio"
    );
    for tool in ["get_order", "transfer"] {
        let mut direct_rate = 0.0;
        for (name, via) in [
            ("direct", Via::Direct(toolbox.clone())),
            ("stdio", Via::Stdio(client.peer().clone())),
        ] {
            let result = run(via, tool, seconds, concurrency, &format!("{tool}-{name}")).await;
            let rate = result.calls as f64 / result.seconds;
            if tool == "transfer" {
                check(&url, result.calls - result.failed).await;
            }
            let ratio = if name == "direct" {
                direct_rate = rate;
                "1.00".to_owned()
            } else {
                format!("{:.2}", rate / direct_rate)
            };
            println!(
                "{:<10} {:<7} {:>9.0} {:>8} {:>9.2} {:>9.2} {:>7}",
                tool,
                name,
                rate,
                result.failed,
                result.latency.value_at_quantile(0.5) as f64 / 1000.0,
                result.latency.value_at_quantile(0.99) as f64 / 1000.0,
                ratio
            );
        }
    }
    client.cancel().await.ok();
    for pool in pools.values() {
        pool.close().await;
    }
}
