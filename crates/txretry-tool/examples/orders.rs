//! A small toolbox an agent could call — `get_order`, `cancel_order`, `transfer` — written
//! in Rust on an embedded SQLite database in a temp file, called concurrently so that real
//! `SQLITE_BUSY` happens and is retried in place, while "order not found" surfaces exactly
//! once. (The same tools declared in YAML and served over MCP: txretry-mcp's
//! `examples/orders.yaml`.)
//!
//! `cargo run --example orders -p txretry-tool`

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use txretry_core::{RetryPolicy, TxOptions};
use txretry_tool::{BoxError, Caller, InvokeError, Tool, ToolContext, Toolbox};

#[derive(Deserialize, JsonSchema)]
struct OrderId {
    /// The order's id.
    order_id: i64,
}

#[derive(Deserialize, JsonSchema)]
struct Transfer {
    /// The account to take from.
    from: i64,
    /// The account to pay into.
    to: i64,
    /// How much.
    cents: i64,
}

fn toolbox(pool: SqlitePool, retries: Arc<AtomicU32>) -> Result<Toolbox, BoxError> {
    let policy = RetryPolicy::builder()
        .max_attempts(10)
        .backoff(txretry_core::Backoff::Exponential {
            initial: std::time::Duration::from_millis(2),
            factor: 2.0,
        })
        .jitter(txretry_core::Jitter::Full)
        .build()?;
    let get = {
        let pool = pool.clone();
        Tool::new(
            "get_order",
            "Look an order up by its id.",
            move |ctx: ToolContext, args: OrderId| {
                let pool = pool.clone();
                async move {
                    let options = TxOptions::new().read_only(true);
                    let row: Option<(String, i64)> = txretry_sqlx::transaction_with(
                        &pool,
                        ctx.policy(),
                        &options,
                        async move |tx| {
                            sqlx::query_as("SELECT status, cents FROM orders WHERE id = ?")
                                .bind(args.order_id)
                                .fetch_optional(&mut **tx)
                                .await
                        },
                    )
                    .await?;
                    let (status, cents) =
                        row.ok_or_else(|| format!("order {} not found", args.order_id))?;
                    Ok::<_, BoxError>(
                        json!({ "order_id": args.order_id, "status": status, "cents": cents }),
                    )
                }
            },
        )
        .read_only(true)
    };
    let cancel = {
        let pool = pool.clone();
        Tool::new("cancel_order", "Cancel an open order.", move |ctx: ToolContext, args: OrderId| {
            let pool = pool.clone();
            async move {
                let cancelled = txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                    sqlx::query("UPDATE orders SET status = 'cancelled' WHERE id = ? AND status = 'open'")
                        .bind(args.order_id)
                        .execute(&mut **tx)
                        .await
                        .map(|done| done.rows_affected())
                })
                .await?;
                if cancelled == 0 {
                    return Err::<String, BoxError>(format!("order {} not found or not open", args.order_id).into());
                }
                Ok(format!("order {} cancelled", args.order_id))
            }
        })
        .roles(["support"])
    };
    let transfer = Tool::new(
        "transfer",
        "Move cents between accounts.",
        move |ctx: ToolContext, args: Transfer| {
            let pool = pool.clone();
            async move {
                // DEFERRED: the transaction reads, then writes; a writer in between makes it fail
                // with SQLITE_BUSY at once, and the runner runs it again.
                let options = TxOptions::new().sqlite_begin(txretry_core::SqliteBegin::Deferred);
                txretry_sqlx::transaction_with(&pool, ctx.policy(), &options, async move |tx| {
                    let balance: i64 =
                        sqlx::query_scalar("SELECT cents FROM accounts WHERE id = ?")
                            .bind(args.from)
                            .fetch_one(&mut **tx)
                            .await?;
                    if balance < args.cents {
                        return Err(BoxError::from(format!(
                            "account {} is short of {} cents",
                            args.from, args.cents
                        )));
                    }
                    for (account, delta) in [(args.from, -args.cents), (args.to, args.cents)] {
                        sqlx::query("UPDATE accounts SET cents = cents + ? WHERE id = ?")
                            .bind(delta)
                            .bind(account)
                            .execute(&mut **tx)
                            .await?;
                    }
                    Ok(format!(
                        "moved {} cents from {} to {}",
                        args.cents, args.from, args.to
                    ))
                })
                .await
                .map_err(BoxError::from)
            }
        },
    )
    .roles(["teller"]);
    Ok(Toolbox::builder()
        .policy(policy)
        .on_retry(move |e| {
            retries.fetch_add(1, Ordering::Relaxed);
            println!(
                "  retry  {:<12} {:<6} attempt {}/{} ({}), waiting {:?}",
                e.tool.unwrap_or("?"),
                e.call_id.unwrap_or("?"),
                e.attempt,
                e.max_attempts,
                e.kind().map_or("ambiguous", |k| k.as_str()),
                e.delay,
            );
        })
        .persona("agent", ["get_order", "cancel_order", "transfer"])
        .tool(get)
        .tool(cancel)
        .tool(transfer)
        .build()?)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let options = SqliteConnectOptions::from_str(&format!(
        "sqlite://{}",
        dir.path().join("orders.db").display()
    ))?
    .create_if_missing(true)
    .journal_mode(SqliteJournalMode::Wal);
    let pool = SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await?;
    sqlx::raw_sql(
        "CREATE TABLE accounts (id INTEGER PRIMARY KEY, cents INTEGER NOT NULL);
         CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL, cents INTEGER NOT NULL);
         INSERT INTO accounts VALUES (1, 10000), (2, 10000), (3, 10000), (4, 10000);
         INSERT INTO orders VALUES (1, 'open', 2500), (2, 'open', 400);",
    )
    .execute(&pool)
    .await?;
    let retries = Arc::new(AtomicU32::new(0));
    let toolbox = toolbox(pool.clone(), retries.clone())?;
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
    let total: i64 = sqlx::query_scalar("SELECT sum(cents) FROM accounts")
        .fetch_one(&pool)
        .await?;
    println!(
        "{moved}/16 transfers committed after {} retries; money in the system: {total} (was 40000)",
        retries.load(Ordering::Relaxed),
    );

    println!("\nthe model cancels order 1, then order 999:");
    println!(
        "  ok: {}",
        toolbox
            .invoke(&agent, "cancel_order", json!({"order_id": 1}), "c-1")
            .await?
    );
    match toolbox
        .invoke(&agent, "cancel_order", json!({"order_id": 999}), "c-2")
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
    pool.close().await;
    Ok(())
}
