//! The call ids rig and the MCP server make up are unique across processes. A `once` tool
//! keyed by the call id (`Once::new()`) records each call in a table that outlives the
//! process: when the first call of a new process got the same id as the first call of the
//! one before (`rig-1`, `mcp-1-0`), it was answered with that call's record and its own
//! work was never done. Two processes (this test binary, run again as a child for the
//! ignored `one_process` test) call the same `once` tool on one SQLite file, through rig
//! and through an MCP session; every call must do its own work.

use std::path::Path;
use std::process::Command;

use rig_agent::tool::{ToolContext as RigContext, ToolSet};
use rmcp::model::CallToolResult;
use serde_json::json;
use sqlx::SqlitePool;
use sqlx::sqlite::SqliteConnectOptions;
use txretry_tool::mcp::ToolboxServer;
use txretry_tool::{BoxError, Caller, Once, Tool, ToolContext, Toolbox};

use crate::common::{Recorder, call, connect, policy, text};

/// The SQLite file the child process writes to.
const DB_VAR: &str = "TXRETRY_CALL_IDS_DB";
/// The value the child process's calls insert.
const VALUE_VAR: &str = "TXRETRY_CALL_IDS_VALUE";

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Insert {
    /// The value to insert.
    value: i64,
}

/// A `once` tool keyed by the call id that inserts its value into `effects`.
fn insert_tool(pool: &SqlitePool) -> Tool {
    let pool = pool.clone();
    Tool::new(
        "insert",
        "Inserts a value.",
        move |ctx: ToolContext, args: Insert| {
            let pool = pool.clone();
            async move {
                ctx.once(&pool, async move |tx| {
                    sqlx::query("INSERT INTO effects (value) VALUES (?)")
                        .bind(args.value)
                        .execute(&mut **tx)
                        .await?;
                    Ok::<_, BoxError>(args.value)
                })
                .await
            }
        },
    )
    .once(Once::new())
}

async fn pool(file: &Path) -> SqlitePool {
    let options = SqliteConnectOptions::new()
        .filename(file)
        .create_if_missing(true);
    let pool = SqlitePool::connect_with(options).await.unwrap();
    sqlx::query("CREATE TABLE IF NOT EXISTS effects (value INTEGER NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    pool
}

/// One process's calls: `value` through rig, `value + 1` through an MCP session.
async fn calls(file: &Path, value: i64) {
    let pool = pool(file).await;
    let toolbox = Toolbox::builder()
        .policy(policy(3))
        .tool(insert_tool(&pool))
        .build()
        .unwrap();
    let caller = Caller::new(["user"]);

    let tools = ToolSet::from_dynamic_tools(txretry_tool::rig::tools(&toolbox, &caller));
    let through_rig = tools
        .execute(
            "insert",
            &json!({ "value": value }).to_string(),
            &mut RigContext::new(),
        )
        .await;
    assert_eq!(
        through_rig.output().as_json(),
        Some(&json!(value)),
        "{:?}",
        through_rig.error()
    );

    let client = connect(
        ToolboxServer::for_caller(toolbox, Some(caller)),
        Recorder::default(),
    )
    .await;
    let through_mcp: CallToolResult = call(&client, "insert", json!({ "value": value + 1 }))
        .await
        .unwrap();
    assert_eq!(
        text(&through_mcp),
        (value + 1).to_string(),
        "{through_mcp:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_process_makes_ids_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("calls.db");
    for value in [10, 20] {
        let status = Command::new(std::env::current_exe().unwrap())
            .args(["call_ids::one_process", "--exact", "--ignored", "--quiet"])
            .env(DB_VAR, &file)
            .env(VALUE_VAR, value.to_string())
            .status()
            .unwrap();
        assert!(status.success(), "the child process for {value} failed");
    }
    let pool = pool(&file).await;
    let values: Vec<i64> = sqlx::query_scalar("SELECT value FROM effects ORDER BY value")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(values, [10, 11, 20, 21], "each call did its own work, once");
}

/// The child of `every_process_makes_ids_of_its_own`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by call_ids::every_process_makes_ids_of_its_own"]
async fn one_process() {
    let file = std::env::var_os(DB_VAR).expect("run by every_process_makes_ids_of_its_own");
    let value = std::env::var(VALUE_VAR).unwrap().parse().unwrap();
    calls(Path::new(&file), value).await;
}
