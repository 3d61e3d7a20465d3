//! A small toolbox an agent could call — `get_order`, `cancel_order`, `transfer` — on an
//! embedded SQLite database in a temp file (the same tools also run on Postgres and
//! MySQL/MariaDB: see the `txretry-mcp-orders` server's `--db`), called concurrently so real `SQLITE_BUSY`
//! happens and is retried in place, while "order not found" surfaces exactly once.
//!
//! `cargo run --example orders -p txretry-tool`

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::json;
use txretry_tool::{BoxError, Caller, InvokeError, Toolbox};

// The toolbox itself is the `txretry-mcp-orders` MCP server's.
use txretry_mcp_orders::orders;

fn toolbox(orders: &orders::Orders, retries: Arc<AtomicU32>) -> Result<Toolbox, BoxError> {
    let builder = Toolbox::builder()
        .policy(orders::policy(10)?)
        .on_retry(move |e| {
            retries.fetch_add(1, Ordering::Relaxed);
            println!(
                "  retry  {:<12} {:<6} attempt {}/{} after {} ({}), waiting {:?}",
                e.tool.unwrap_or("?"),
                e.call_id.unwrap_or("?"),
                e.attempt,
                e.max_attempts,
                e.kind().map_or("ambiguous", |k| k.as_str()),
                e.code.map(|c| c.to_string()).unwrap_or_default(),
                e.delay,
            );
        })
        .on_give_up(|e| {
            println!(
                "  gave up {} {}: {} ({:?})",
                e.tool.unwrap_or("?"),
                e.call_id.unwrap_or("?"),
                e.outcome.verdict(),
                e.outcome.stop_reason()
            )
        });
    Ok(orders.toolbox(builder)?)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let orders = orders::Orders::sqlite(&dir.path().join("orders.db")).await?;
    let retries = Arc::new(AtomicU32::new(0));
    let toolbox = toolbox(&orders, retries.clone())?;
    let agent = Caller::new(["support", "teller"]).persona("agent");

    println!("offered to the agent:");
    for tool in toolbox.offered(&agent) {
        println!("  {:<12} {}", tool.name(), tool.description());
    }

    println!("\n16 concurrent transfers between 4 accounts:");
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..16_i64 {
        let (toolbox, agent) = (toolbox.clone(), agent.clone());
        let args = json!({ "from": i % 4 + 1, "to": (i + 1) % 4 + 1, "cents": 100 + i });
        calls.spawn(async move {
            toolbox
                .invoke(&agent, "transfer", args, &format!("t-{i}"))
                .await
        });
    }
    let mut moved = 0;
    while let Some(result) = calls.join_next().await {
        match result? {
            Ok(_) => moved += 1,
            Err(e) => println!("  transfer failed: {e}"),
        }
    }
    let total = orders.money().await?;
    println!(
        "{moved}/16 transfers committed after {} retries, in {} runs of the handler; money in the system: {total} (was {})",
        retries.load(Ordering::Relaxed),
        orders.handler_runs("transfer").await?,
        orders::TOTAL_CENTS,
    );

    println!("\nthe model cancels order 1 twice at once, then order 999:");
    let (a, b) = tokio::join!(
        toolbox.invoke(&agent, "cancel_order", json!({"order_id": 1}), "c-1"),
        toolbox.invoke(&agent, "cancel_order", json!({"order_id": 1}), "c-2"),
    );
    for result in [a, b] {
        match result {
            Ok(out) => println!("  ok: {out}"),
            Err(e) => println!("  refused: {e}"),
        }
    }
    match toolbox
        .invoke(&agent, "cancel_order", json!({"order_id": 999}), "c-3")
        .await
    {
        Err(InvokeError::Failed(failure)) => println!(
            "  the model sees: {failure}\n    (kind {}, the handler ran {} time, {} retries)",
            failure.kind(),
            failure.attempts().len(),
            failure.retries(),
        ),
        other => println!("  unexpected: {other:?}"),
    }

    let order = toolbox
        .invoke(&agent, "get_order", json!({"order_id": 1}), "g-1")
        .await?;
    println!("\nget_order 1: {order}");
    let denied = toolbox
        .invoke(
            &Caller::new(["support"]),
            "transfer",
            json!({"from": 1, "to": 2, "cents": 1}),
            "x",
        )
        .await;
    println!(
        "a support-only caller asking for transfer: {}",
        denied.unwrap_err()
    );
    orders.close().await;
    Ok(())
}
