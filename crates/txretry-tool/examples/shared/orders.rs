//! The orders toolbox — `get_order`, `cancel_order`, `transfer` — on an embedded SQLite
//! database, shared by `examples/orders.rs` and the `txretry-mcp-orders` MCP server.
//!
//! - `cancel_order` (role `support`) cancels an open order and refunds it: the shop's account
//!   pays the customer's, and both movements go into the ledger with the call's id;
//! - `transfer` (role `teller`) moves money between two accounts, also through the ledger;
//! - `get_order` (read-only, idempotent, any role) looks an order up.
//!
//! The money is conserved: the accounts always hold [`TOTAL_CENTS`] together and the ledger
//! sums to zero. Every run of a handler is counted in `handler_runs` (on a connection of its
//! own that waits for locks), so how often a handler ran is in the database too. The main pool
//! does not wait for locks (`busy_timeout` 0): concurrent calls collide for real
//! (`SQLITE_BUSY`) and txretry retries them in place.

use std::path::Path;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use txretry_core::{Backoff, Jitter, PolicyError, RetryPolicy, SqliteBegin, TxOptions};
use txretry_tool::{BoxError, BuildError, Tool, ToolContext, Toolbox, ToolboxBuilder};

/// Created when missing; the seed rows only where they are missing.
const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS accounts (id INTEGER PRIMARY KEY, cents INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS orders (
        id INTEGER PRIMARY KEY,
        account INTEGER NOT NULL REFERENCES accounts (id),
        status TEXT NOT NULL,
        cents INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS ledger (
        id INTEGER PRIMARY KEY,
        call_id TEXT NOT NULL,
        order_id INTEGER,
        account INTEGER NOT NULL,
        cents INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS handler_runs (tool TEXT PRIMARY KEY, runs INTEGER NOT NULL);
    INSERT OR IGNORE INTO accounts VALUES (0, 100000), (1, 10000), (2, 10000), (3, 10000), (4, 10000);
    INSERT OR IGNORE INTO orders VALUES
        (1, 1, 'open', 2500), (2, 2, 'open', 990), (3, 3, 'shipped', 1200), (4, 4, 'open', 1500),
        (5, 1, 'open', 700), (6, 2, 'open', 3100), (7, 3, 'open', 450), (8, 4, 'open', 2000);
";

/// The money in the seeded accounts (account 0 is the shop's), which no tool changes.
pub const TOTAL_CENTS: i64 = 140_000;

#[derive(Deserialize, JsonSchema)]
struct OrderId {
    /// The order's id.
    order_id: i64,
}

#[derive(Serialize)]
struct Order {
    id: i64,
    account: i64,
    status: String,
    cents: i64,
}

#[derive(Deserialize, JsonSchema)]
struct Transfer {
    /// The account to take the money from.
    from: i64,
    /// The account to put it in.
    to: i64,
    /// How much, in cents (positive).
    cents: i64,
}

/// A business outcome: surfaced to the model once, never retried.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("order {0} not found")]
    OrderNotFound(i64),
    #[error("order {0} is already {1}")]
    NotOpen(i64, String),
    #[error("account {0} not found")]
    AccountNotFound(i64),
    #[error("the amount must be positive, not {0}")]
    NotPositive(i64),
    #[error("account {0} has {1} cents, not {2}")]
    InsufficientFunds(i64, i64, i64),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// The orders database: the pool the tools use, and the connection that counts handler runs.
#[derive(Clone, Debug)]
pub struct Orders {
    pool: SqlitePool,
    counter: SqlitePool,
}

impl Orders {
    /// Opens the database at `path` in WAL mode, creating the file, the tables and the seed
    /// rows where they are missing (so an existing database keeps its data).
    pub async fn open(path: &Path) -> Result<Orders, sqlx::Error> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let counter = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone().busy_timeout(Duration::from_secs(30)))
            .await?;
        sqlx::raw_sql(SCHEMA).execute(&counter).await?;
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            // No waiting on locks: a collision is an immediate SQLITE_BUSY, retried by txretry.
            .connect_with(options.busy_timeout(Duration::ZERO))
            .await?;
        Ok(Orders { pool, counter })
    }

    /// The pool the tools run their transactions on.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// How many times the handler of `tool` ran (each run counts once, whatever it returned).
    pub async fn handler_runs(&self, tool: &str) -> Result<i64, sqlx::Error> {
        let runs: Option<i64> = sqlx::query_scalar("SELECT runs FROM handler_runs WHERE tool = ?")
            .bind(tool)
            .fetch_optional(&self.counter)
            .await?;
        Ok(runs.unwrap_or(0))
    }

    /// Closes both pools (the last connection checkpoints the WAL into the file).
    pub async fn close(&self) {
        self.pool.close().await;
        self.counter.close().await;
    }

    /// Counts a run of `tool`'s handler. A failure to count is not the call's failure.
    async fn count(&self, tool: &str) {
        let counted = sqlx::query(
            "INSERT INTO handler_runs (tool, runs) VALUES (?, 1)
             ON CONFLICT (tool) DO UPDATE SET runs = runs + 1",
        )
        .bind(tool)
        .execute(&self.counter)
        .await;
        if let Err(error) = counted {
            eprintln!("could not count a run of {tool}: {error}");
        }
    }

    /// The three tools, on this database.
    pub fn tools(&self) -> Vec<Tool> {
        vec![self.get_order(), self.cancel_order(), self.transfer()]
    }

    /// Registers the tools on `builder` (which may carry hooks and a policy), with the persona
    /// lists `agent` (every tool) and `viewer` (`get_order` only), and builds the toolbox.
    pub fn toolbox(&self, builder: ToolboxBuilder) -> Result<Toolbox, BuildError> {
        let mut builder = builder
            .persona("agent", ["get_order", "cancel_order", "transfer"])
            .persona("viewer", ["get_order"]);
        for tool in self.tools() {
            builder = builder.tool(tool);
        }
        builder.build()
    }

    fn get_order(&self) -> Tool {
        let orders = self.clone();
        Tool::new(
            "get_order",
            "Look an order up by id: its account, status and amount in cents.",
            move |ctx: ToolContext, args: OrderId| {
                let orders = orders.clone();
                async move {
                    let read_only = TxOptions::new().read_only(true);
                    let order = txretry_sqlx::transaction_with(
                        &orders.pool,
                        ctx.policy(),
                        &read_only,
                        async move |tx| {
                            let row: Option<(i64, String, i64)> = sqlx::query_as(
                                "SELECT account, status, cents FROM orders WHERE id = ?",
                            )
                            .bind(args.order_id)
                            .fetch_optional(&mut **tx)
                            .await?;
                            let (account, status, cents) =
                                row.ok_or(Refusal::OrderNotFound(args.order_id))?;
                            Ok::<_, Refusal>(Order {
                                id: args.order_id,
                                account,
                                status,
                                cents,
                            })
                        },
                    )
                    .await;
                    orders.count("get_order").await;
                    Ok::<_, BoxError>(order?)
                }
            },
        )
        .read_only(true)
        .idempotent(true)
    }

    fn cancel_order(&self) -> Tool {
        let orders = self.clone();
        Tool::new(
            "cancel_order",
            "Cancel an open order and refund its amount to the customer's account.",
            move |ctx: ToolContext, args: OrderId| {
                let orders = orders.clone();
                async move {
                    let call_id = ctx.call_id().to_owned();
                    let refunded =
                        txretry_sqlx::transaction(&orders.pool, ctx.policy(), async move |tx| {
                            let row: Option<(i64, String, i64)> = sqlx::query_as(
                                "SELECT account, status, cents FROM orders WHERE id = ?",
                            )
                            .bind(args.order_id)
                            .fetch_optional(&mut **tx)
                            .await?;
                            let (account, cents) = match row {
                                None => return Err(Refusal::OrderNotFound(args.order_id)),
                                Some((account, status, cents)) if status == "open" => {
                                    (account, cents)
                                }
                                Some((_, status, _)) => {
                                    return Err(Refusal::NotOpen(args.order_id, status));
                                }
                            };
                            sqlx::query("UPDATE orders SET status = 'cancelled' WHERE id = ?")
                                .bind(args.order_id)
                                .execute(&mut **tx)
                                .await?;
                            for (account, delta) in [(0, -cents), (account, cents)] {
                                sqlx::query("UPDATE accounts SET cents = cents + ? WHERE id = ?")
                                    .bind(delta)
                                    .bind(account)
                                    .execute(&mut **tx)
                                    .await?;
                                sqlx::query(
                                    "INSERT INTO ledger (call_id, order_id, account, cents)
                                     VALUES (?, ?, ?, ?)",
                                )
                                .bind(&call_id)
                                .bind(args.order_id)
                                .bind(account)
                                .bind(delta)
                                .execute(&mut **tx)
                                .await?;
                            }
                            Ok(cents)
                        })
                        .await;
                    orders.count("cancel_order").await;
                    let cents = refunded?;
                    Ok::<_, BoxError>(
                        json!({ "cancelled": args.order_id, "refunded_cents": cents }),
                    )
                }
            },
        )
        .roles(["support"])
    }

    fn transfer(&self) -> Tool {
        // Read first, write later: DEFERRED transactions, so two transfers that read the same
        // account collide for real (SQLITE_BUSY / SQLITE_BUSY_SNAPSHOT) and one is retried.
        let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
        let orders = self.clone();
        Tool::new(
            "transfer",
            "Move money between two accounts.",
            move |ctx: ToolContext, t: Transfer| {
                let (orders, deferred) = (orders.clone(), deferred.clone());
                async move {
                    let call_id = ctx.call_id().to_owned();
                    let moved = txretry_sqlx::transaction_with(
                        &orders.pool,
                        ctx.policy(),
                        &deferred,
                        async move |tx| {
                            if t.cents <= 0 {
                                return Err(Refusal::NotPositive(t.cents));
                            }
                            let balance: Option<i64> =
                                sqlx::query_scalar("SELECT cents FROM accounts WHERE id = ?")
                                    .bind(t.from)
                                    .fetch_optional(&mut **tx)
                                    .await?;
                            let balance = balance.ok_or(Refusal::AccountNotFound(t.from))?;
                            if balance < t.cents {
                                return Err(Refusal::InsufficientFunds(t.from, balance, t.cents));
                            }
                            // Some thinking between the read and the write widens the window in
                            // which another transfer commits first.
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            for (account, delta) in [(t.from, -t.cents), (t.to, t.cents)] {
                                let updated = sqlx::query(
                                    "UPDATE accounts SET cents = cents + ? WHERE id = ?",
                                )
                                .bind(delta)
                                .bind(account)
                                .execute(&mut **tx)
                                .await?;
                                if updated.rows_affected() == 0 {
                                    return Err(Refusal::AccountNotFound(account));
                                }
                                sqlx::query(
                                    "INSERT INTO ledger (call_id, account, cents) VALUES (?, ?, ?)",
                                )
                                .bind(&call_id)
                                .bind(account)
                                .bind(delta)
                                .execute(&mut **tx)
                                .await?;
                            }
                            Ok(t.cents)
                        },
                    )
                    .await;
                    orders.count("transfer").await;
                    Ok::<_, BoxError>(json!({ "moved": moved? }))
                }
            },
        )
        .roles(["teller"])
    }
}

/// The toolbox's policy: up to `max_attempts` per call (shared by every loop in it),
/// exponential backoff from 2 ms, at most 50 ms, full jitter.
pub fn policy(max_attempts: u32) -> Result<RetryPolicy, PolicyError> {
    RetryPolicy::builder()
        .max_attempts(max_attempts)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(2),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(50))
        .jitter(Jitter::Full)
        .build()
}
