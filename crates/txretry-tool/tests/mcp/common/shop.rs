//! The shop: three tools (`get_order`, `cancel_order`, `transfer`) on an SQLite file in a
//! temp directory, a writer that holds SQLite's write lock so that the tools' transactions
//! fail for real ([`Holder`]), and the database's state read back ([`State`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Connection, SqlitePool};
use txretry_core::{SqliteBegin, TxOptions};
use txretry_tool::{BoxError, Tool, ToolContext, Toolbox, ToolboxBuilder};

use super::Recorder;

/// The money in the seeded accounts (account 0 is the shop's), which no tool changes.
pub const TOTAL_CENTS: i64 = 140_000;

#[derive(Deserialize, JsonSchema)]
struct OrderId {
    /// The order's id.
    order_id: i64,
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

/// How many times each tool's handler ran (each run counts once, whatever it returned).
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<HashMap<&'static str, i64>>>);

impl Runs {
    fn count(&self, tool: &'static str) {
        *self.0.lock().unwrap().entry(tool).or_default() += 1;
    }
}

/// The shop: accounts, orders and a ledger in an SQLite file (WAL) in a temp directory.
///
/// - `get_order` (read-only, idempotent, any role) looks an order up;
/// - `cancel_order` (role `support`) cancels an open order and refunds it: the shop's
///   account pays the customer's, and both movements go into the ledger with the call's id;
/// - `transfer` (role `teller`) moves money between two accounts, through the ledger too.
///
/// The tools' pool does not wait for locks (`busy_timeout` 0): a collision is an immediate
/// SQLITE_BUSY, retried by txretry. Personas: `agent` (every tool), `viewer` (`get_order`).
pub struct Shop {
    pool: SqlitePool,
    options: SqliteConnectOptions,
    runs: Runs,
    _dir: tempfile::TempDir,
}

impl Shop {
    pub async fn new() -> Shop {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("shop.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.clone().busy_timeout(Duration::ZERO))
            .await
            .unwrap();
        sqlx::raw_sql(
            "CREATE TABLE accounts (id INTEGER PRIMARY KEY, cents INTEGER NOT NULL);
             CREATE TABLE orders (id INTEGER PRIMARY KEY, account INTEGER NOT NULL,
                                  status TEXT NOT NULL, cents INTEGER NOT NULL);
             CREATE TABLE ledger (id INTEGER PRIMARY KEY, call_id TEXT NOT NULL,
                                  order_id INTEGER, account INTEGER NOT NULL,
                                  cents INTEGER NOT NULL);
             INSERT INTO accounts VALUES (0, 100000), (1, 10000), (2, 10000), (3, 10000), (4, 10000);
             INSERT INTO orders VALUES (1, 1, 'open', 2500), (2, 2, 'open', 400),
                                       (3, 3, 'shipped', 1200), (4, 4, 'open', 900),
                                       (5, 1, 'open', 300);",
        )
        .execute(&pool)
        .await
        .unwrap();
        Shop {
            pool,
            options: options.busy_timeout(Duration::from_secs(30)),
            runs: Runs::default(),
            _dir: dir,
        }
    }

    /// The pool the tools run their transactions on.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// How many times the handler of `tool` ran.
    pub fn runs(&self, tool: &str) -> i64 {
        self.runs.0.lock().unwrap().get(tool).copied().unwrap_or(0)
    }

    /// The three tools.
    pub fn tools(&self) -> Vec<Tool> {
        vec![self.get_order(), self.cancel_order(), self.transfer()]
    }

    /// Registers the tools on `builder` (which may carry hooks and a policy), with the
    /// personas `agent` (every tool) and `viewer` (`get_order` only), and builds the toolbox.
    pub fn toolbox(&self, builder: ToolboxBuilder) -> Toolbox {
        let mut builder = builder
            .persona("agent", ["get_order", "cancel_order", "transfer"])
            .persona("viewer", ["get_order"]);
        for tool in self.tools() {
            builder = builder.tool(tool);
        }
        builder.build().unwrap()
    }

    fn get_order(&self) -> Tool {
        let (pool, runs) = (self.pool.clone(), self.runs.clone());
        Tool::new(
            "get_order",
            "Look an order up by id: its account, status and amount in cents.",
            move |ctx: ToolContext, args: OrderId| {
                let (pool, runs) = (pool.clone(), runs.clone());
                async move {
                    runs.count("get_order");
                    let read_only = TxOptions::new().read_only(true);
                    let row: Option<(i64, String, i64)> = txretry_sqlx::transaction_with(
                        &pool,
                        ctx.policy(),
                        &read_only,
                        async move |tx| {
                            sqlx::query_as("SELECT account, status, cents FROM orders WHERE id = ?")
                                .bind(args.order_id)
                                .fetch_optional(&mut **tx)
                                .await
                        },
                    )
                    .await?;
                    let (account, status, cents) =
                        row.ok_or_else(|| format!("order {} not found", args.order_id))?;
                    Ok::<_, BoxError>(json!({
                        "id": args.order_id, "account": account, "status": status, "cents": cents
                    }))
                }
            },
        )
        .read_only(true)
        .idempotent(true)
    }

    fn cancel_order(&self) -> Tool {
        let (pool, runs) = (self.pool.clone(), self.runs.clone());
        Tool::new(
            "cancel_order",
            "Cancel an open order and refund its amount to the customer's account.",
            move |ctx: ToolContext, args: OrderId| {
                let (pool, runs) = (pool.clone(), runs.clone());
                async move {
                    runs.count("cancel_order");
                    let call_id = ctx.call_id().to_owned();
                    let id = args.order_id;
                    // BEGIN IMMEDIATE (the default): one writer at a time, SQLITE_BUSY at once
                    // while another holds the write lock.
                    let cents = txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                        let row: Option<(i64, String, i64)> = sqlx::query_as(
                            "SELECT account, status, cents FROM orders WHERE id = ?",
                        )
                        .bind(id)
                        .fetch_optional(&mut **tx)
                        .await?;
                        let (account, cents) = match row {
                            None => return Err(BoxError::from(format!("order {id} not found"))),
                            Some((account, status, cents)) if status == "open" => (account, cents),
                            Some((_, status, _)) => {
                                return Err(format!("order {id} is already {status}").into());
                            }
                        };
                        sqlx::query("UPDATE orders SET status = 'cancelled' WHERE id = ?")
                            .bind(id)
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
                            .bind(id)
                            .bind(account)
                            .bind(delta)
                            .execute(&mut **tx)
                            .await?;
                        }
                        Ok(cents)
                    })
                    .await?;
                    Ok::<_, BoxError>(json!({ "cancelled": id, "refunded_cents": cents }))
                }
            },
        )
        .roles(["support"])
    }

    fn transfer(&self) -> Tool {
        let (pool, runs) = (self.pool.clone(), self.runs.clone());
        Tool::new(
            "transfer",
            "Move money between two accounts.",
            move |ctx: ToolContext, t: Transfer| {
                let (pool, runs) = (pool.clone(), runs.clone());
                async move {
                    runs.count("transfer");
                    let call_id = ctx.call_id().to_owned();
                    // DEFERRED: read first, write later; a writer in between makes it fail with
                    // SQLITE_BUSY, and the runner runs it again.
                    let deferred = TxOptions::new().sqlite_begin(SqliteBegin::Deferred);
                    let moved = txretry_sqlx::transaction_with(
                        &pool,
                        ctx.policy(),
                        &deferred,
                        async move |tx| {
                            if t.cents <= 0 {
                                return Err(BoxError::from(format!(
                                    "the amount must be positive, not {}",
                                    t.cents
                                )));
                            }
                            let balance: Option<i64> =
                                sqlx::query_scalar("SELECT cents FROM accounts WHERE id = ?")
                                    .bind(t.from)
                                    .fetch_optional(&mut **tx)
                                    .await?;
                            let balance =
                                balance.ok_or_else(|| format!("account {} not found", t.from))?;
                            if balance < t.cents {
                                return Err(format!(
                                    "account {} has {balance} cents, not {}",
                                    t.from, t.cents
                                )
                                .into());
                            }
                            for (account, delta) in [(t.from, -t.cents), (t.to, t.cents)] {
                                let updated = sqlx::query(
                                    "UPDATE accounts SET cents = cents + ? WHERE id = ?",
                                )
                                .bind(delta)
                                .bind(account)
                                .execute(&mut **tx)
                                .await?;
                                if updated.rows_affected() == 0 {
                                    return Err(format!("account {account} not found").into());
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
                    .await?;
                    Ok::<_, BoxError>(json!({ "moved": moved }))
                }
            },
        )
        .roles(["teller"])
    }

    /// A connection of the test's own (it waits for locks).
    pub async fn connect(&self) -> SqliteConnection {
        SqliteConnection::connect_with(&self.options).await.unwrap()
    }

    /// Takes SQLite's write lock (`BEGIN IMMEDIATE` on a connection of its own): every
    /// writing transaction of the tools fails with SQLITE_BUSY until the [`Holder`] lets go.
    pub async fn hold(&self) -> Holder {
        let mut conn = self.connect().await;
        sqlx::raw_sql("BEGIN IMMEDIATE")
            .execute(&mut conn)
            .await
            .unwrap();
        Holder { conn }
    }

    pub async fn state(&self) -> State {
        let mut conn = self.connect().await;
        let status: Vec<(i64, String)> = sqlx::query_as("SELECT id, status FROM orders")
            .fetch_all(&mut conn)
            .await
            .unwrap();
        let refunds: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT order_id, count(*) FROM ledger
             WHERE order_id IS NOT NULL AND account <> 0 GROUP BY order_id",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        let ledger: Vec<i64> = sqlx::query_scalar("SELECT cents FROM ledger")
            .fetch_all(&mut conn)
            .await
            .unwrap();
        let money: i64 = sqlx::query_scalar("SELECT sum(cents) FROM accounts")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        let call_ids: Vec<String> =
            sqlx::query_scalar("SELECT DISTINCT call_id FROM ledger ORDER BY call_id")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        State {
            status: status.into_iter().collect(),
            refunds: refunds.into_iter().collect(),
            ledger_sum: ledger.iter().sum(),
            ledger_rows: ledger.len() as i64,
            money,
            call_ids,
        }
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The write lock [`Shop::hold`] took.
pub struct Holder {
    conn: SqliteConnection,
}

impl Holder {
    /// Lets go without having caused anything more.
    pub async fn release(mut self) {
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut self.conn)
            .await
            .unwrap();
    }

    /// Waits until the client hears of a retry (a log message or progress: the tools'
    /// transactions did collide with the lock), then lets go so that they can commit.
    pub async fn release_when_contended(self, recorder: &Recorder) {
        recorder
            .wait_until("a retry notification", |r| {
                !r.logs().is_empty() || !r.progress().is_empty()
            })
            .await;
        self.release().await;
    }
}

/// What the database says after the calls.
#[derive(Debug)]
pub struct State {
    pub status: HashMap<i64, String>,
    /// Per order: how many times its amount went to the customer.
    pub refunds: HashMap<i64, i64>,
    pub ledger_sum: i64,
    pub ledger_rows: i64,
    pub money: i64,
    /// The call ids in the ledger.
    pub call_ids: Vec<String>,
}
