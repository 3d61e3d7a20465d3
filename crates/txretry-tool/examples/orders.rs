//! A small toolbox an agent could call — `get_order`, `cancel_order`, `transfer` — on an
//! embedded SQLite database in a temp file, called concurrently so real `SQLITE_BUSY`
//! happens and is retried in place, while "order not found" surfaces exactly once.
//!
//! `cargo run --example orders -p txretry-tool`

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use txretry_core::{Backoff, Jitter, RetryPolicy, SqliteBegin, TxOptions};
use txretry_tool::{BoxError, Caller, InvokeError, Tool, ToolContext, Toolbox};

#[derive(Deserialize, JsonSchema)]
struct OrderId {
    /// The order's id.
    order_id: i64,
}

#[derive(Serialize)]
struct Order {
    id: i64,
    status: String,
    cents: i64,
}

#[derive(Deserialize, JsonSchema)]
struct Transfer {
    /// The account to take the money from.
    from: i64,
    /// The account to put it in.
    to: i64,
    /// How much, in cents.
    cents: i64,
}

/// A business outcome: surfaced to the model once, never retried.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("order {0} not found")]
    OrderNotFound(i64),
    #[error("order {0} is already {1}")]
    NotOpen(i64, String),
    #[error("account {0} has {1} cents, not {2}")]
    InsufficientFunds(i64, i64, i64),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

fn toolbox(pool: SqlitePool, retries: Arc<AtomicU32>) -> Result<Toolbox, BoxError> {
    // Read first, write later: DEFERRED transactions, so two transfers that read the same
    // account collide for real (SQLITE_BUSY / SQLITE_BUSY_SNAPSHOT) and one is retried.
    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);

    let get_order = {
        let pool = pool.clone();
        Tool::new(
            "get_order",
            "Look an order up by id.",
            move |ctx: ToolContext, args: OrderId| {
                let pool = pool.clone();
                async move {
                    let read_only = TxOptions::new().read_only(true);
                    let order = txretry_sqlx::transaction_with(
                        &pool,
                        ctx.policy(),
                        &read_only,
                        async move |tx| {
                            let row: Option<(String, i64)> =
                                sqlx::query_as("SELECT status, cents FROM orders WHERE id = ?")
                                    .bind(args.order_id)
                                    .fetch_optional(&mut **tx)
                                    .await?;
                            let (status, cents) =
                                row.ok_or(Refusal::OrderNotFound(args.order_id))?;
                            Ok::<_, Refusal>(Order {
                                id: args.order_id,
                                status,
                                cents,
                            })
                        },
                    )
                    .await?;
                    Ok::<_, BoxError>(order)
                }
            },
        )
        .read_only(true)
        .idempotent(true)
    };

    let cancel_order = {
        let pool = pool.clone();
        Tool::new(
            "cancel_order",
            "Cancel an open order.",
            move |ctx: ToolContext, args: OrderId| {
                let pool = pool.clone();
                async move {
                    txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                        let status: Option<String> =
                            sqlx::query_scalar("SELECT status FROM orders WHERE id = ?")
                                .bind(args.order_id)
                                .fetch_optional(&mut **tx)
                                .await?;
                        match status.as_deref() {
                            None => return Err(Refusal::OrderNotFound(args.order_id)),
                            Some("open") => {}
                            Some(other) => {
                                return Err(Refusal::NotOpen(args.order_id, other.to_owned()));
                            }
                        }
                        sqlx::query("UPDATE orders SET status = 'cancelled' WHERE id = ?")
                            .bind(args.order_id)
                            .execute(&mut **tx)
                            .await?;
                        Ok(())
                    })
                    .await?;
                    Ok::<_, BoxError>(json!({ "cancelled": args.order_id }))
                }
            },
        )
        .roles(["support"])
    };

    let transfer = {
        let pool = pool.clone();
        Tool::new(
            "transfer",
            "Move money between two accounts.",
            move |ctx: ToolContext, t: Transfer| {
                let (pool, deferred) = (pool.clone(), deferred.clone());
                async move {
                    txretry_sqlx::transaction_with(
                        &pool,
                        ctx.policy(),
                        &deferred,
                        async move |tx| {
                            let balance: i64 =
                                sqlx::query_scalar("SELECT cents FROM accounts WHERE id = ?")
                                    .bind(t.from)
                                    .fetch_one(&mut **tx)
                                    .await?;
                            if balance < t.cents {
                                return Err(Refusal::InsufficientFunds(t.from, balance, t.cents));
                            }
                            // Some thinking between the read and the write widens the window in
                            // which another transfer commits first.
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            for (account, delta) in [(t.from, -t.cents), (t.to, t.cents)] {
                                sqlx::query("UPDATE accounts SET cents = cents + ? WHERE id = ?")
                                    .bind(delta)
                                    .bind(account)
                                    .execute(&mut **tx)
                                    .await?;
                            }
                            Ok(())
                        },
                    )
                    .await?;
                    Ok::<_, BoxError>(json!({ "moved": t.cents }))
                }
            },
        )
        .roles(["teller"])
    };

    let policy = RetryPolicy::builder()
        .max_attempts(10)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(2),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(50))
        .jitter(Jitter::Full)
        .build()?;
    Ok(Toolbox::builder()
        .policy(policy)
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
        })
        .tool(get_order)
        .tool(cancel_order)
        .tool(transfer)
        .persona("agent", ["get_order", "cancel_order", "transfer"])
        .build()?)
}

async fn database(path: &std::path::Path) -> Result<SqlitePool, BoxError> {
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(
            SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                // No waiting on locks: a collision is an immediate SQLITE_BUSY.
                .busy_timeout(Duration::ZERO),
        )
        .await?;
    sqlx::raw_sql(
        "CREATE TABLE accounts (id INTEGER PRIMARY KEY, cents INTEGER NOT NULL);
         INSERT INTO accounts VALUES (1, 10000), (2, 10000), (3, 10000), (4, 10000);
         CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL, cents INTEGER NOT NULL);
         INSERT INTO orders VALUES (1, 'open', 2500), (2, 'open', 990), (3, 'shipped', 1200);",
    )
    .execute(&pool)
    .await?;
    Ok(pool)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    let pool = database(&dir.path().join("orders.db")).await?;
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
        retries.load(Ordering::Relaxed)
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
    Ok(())
}
