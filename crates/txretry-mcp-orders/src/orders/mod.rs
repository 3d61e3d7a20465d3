//! The orders toolbox — `get_order`, `cancel_order`, `transfer` — on SQLite, Postgres or
//! MySQL/MariaDB, served by the `txretry-mcp-orders` MCP server and run by txretry-tool's
//! `orders` example.
//!
//! - `cancel_order` (role `support`) cancels an open order and refunds it: the shop's account
//!   pays the customer's, and both movements go into the ledger with the call's id;
//! - `transfer` (role `teller`) moves money between two accounts, also through the ledger;
//! - `get_order` (read-only, idempotent, any role) looks an order up.
//!
//! The money is conserved: the accounts always hold [`TOTAL_CENTS`] together and the ledger
//! sums to zero. Every run of a handler is counted in `handler_runs` (on a pool of its own),
//! so how often a handler ran is in the database too.
//!
//! Each handler is written once, generic over the database ([`backend::Backend`]); the SQL
//! differences are in one table ([`dialect`]). Contention is real on each: SQLite's pool
//! does not wait for locks (`busy_timeout` 0), so colliding calls fail with `SQLITE_BUSY`;
//! on Postgres and MySQL/MariaDB the writing tools run SERIALIZABLE, so colliding calls fail
//! with serialization failures (Postgres) and deadlocks (InnoDB's shared read locks).
//! txretry retries all of them in place.

pub mod backend;
pub mod dialect;
pub mod target;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::mysql::{MySqlConnection, MySqlPoolOptions};
use sqlx::postgres::{PgConnection, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Connection, Pool};
use txretry_core::{Backoff, Isolation, Jitter, PolicyError, RetryPolicy, SqliteBegin, TxOptions};
use txretry_tool::{BoxError, BuildError, Tool, ToolContext, Toolbox, ToolboxBuilder};

use backend::{Backend, Bind};
use dialect::{Dialect, Prefix, Statements};
use target::Target;

/// The money in the seeded accounts (account 0 is the shop's), which no tool changes.
pub const TOTAL_CENTS: i64 = 140_000;

/// Connections per server pool: enough for calls to collide.
const SERVER_POOL: u32 = 8;

/// How long opening a server database may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Why the orders database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The server did not answer, or refused the connection.
    #[error("cannot connect: {0}")]
    Connect(#[source] sqlx::Error),
    /// It did not answer within the connect timeout.
    #[error("cannot connect: no answer within {0:?}")]
    Timeout(Duration),
    /// The tables could not be created or seeded.
    #[error("cannot create the tables: {0}")]
    Schema(#[source] sqlx::Error),
}

/// The orders database: one of the three backends.
#[derive(Clone, Debug)]
pub enum Orders {
    /// On an SQLite file.
    Sqlite(Store<sqlx::Sqlite>),
    /// On a Postgres server.
    Postgres(Store<sqlx::Postgres>),
    /// On a MySQL or MariaDB server.
    MySql(Store<sqlx::MySql>),
}

/// `$body` with `$store` bound to the [`Store`] of whichever backend `$orders` is.
macro_rules! each {
    ($orders:expr, $store:ident => $body:expr) => {
        match $orders {
            Orders::Sqlite($store) => $body,
            Orders::Postgres($store) => $body,
            Orders::MySql($store) => $body,
        }
    };
}

impl Orders {
    /// Opens `target`, creating the tables (named with `prefix`) and the seed rows where
    /// they are missing, so an existing database keeps its data.
    pub async fn open(target: &Target, prefix: &Prefix) -> Result<Orders, OpenError> {
        let opening = async {
            Ok(match target {
                Target::Sqlite(path) => Orders::Sqlite(sqlite(path, prefix).await?),
                Target::Postgres(options) => {
                    // Named in pg_stat_activity, so an operator sees whose sessions these are.
                    let options = options.clone().application_name("txretry-mcp-orders");
                    let mut probe = PgConnection::connect_with(&options)
                        .await
                        .map_err(OpenError::Connect)?;
                    let store = Store::new(
                        PgPoolOptions::new()
                            .max_connections(SERVER_POOL)
                            .connect_lazy_with(options.clone()),
                        PgPoolOptions::new()
                            .max_connections(1)
                            .connect_lazy_with(options),
                        prefix,
                    );
                    store.migrate(&mut probe).await?;
                    Orders::Postgres(store)
                }
                Target::MySql(options) => {
                    let mut probe = MySqlConnection::connect_with(options)
                        .await
                        .map_err(OpenError::Connect)?;
                    let store = Store::new(
                        MySqlPoolOptions::new()
                            .max_connections(SERVER_POOL)
                            .connect_lazy_with(options.clone()),
                        MySqlPoolOptions::new()
                            .max_connections(1)
                            .connect_lazy_with(options.clone()),
                        prefix,
                    );
                    store.migrate(&mut probe).await?;
                    Orders::MySql(store)
                }
            })
        };
        tokio::time::timeout(CONNECT_TIMEOUT, opening)
            .await
            .map_err(|_| OpenError::Timeout(CONNECT_TIMEOUT))?
    }

    /// [`open`](Orders::open) on the SQLite file at `path`, without a table prefix.
    pub async fn sqlite(path: &Path) -> Result<Orders, OpenError> {
        Orders::open(&Target::Sqlite(path.to_owned()), &Prefix::default()).await
    }

    /// Which database this is.
    pub fn dialect(&self) -> Dialect {
        match self {
            Orders::Sqlite(_) => Dialect::Sqlite,
            Orders::Postgres(_) => Dialect::Postgres,
            Orders::MySql(_) => Dialect::MySql,
        }
    }

    /// How many times the handler of `tool` ran (each run counts once, whatever it returned).
    pub async fn handler_runs(&self, tool: &str) -> Result<i64, sqlx::Error> {
        each!(self, store => store.handler_runs(tool).await)
    }

    /// The money in all the accounts together ([`TOTAL_CENTS`] unless something is wrong).
    pub async fn money(&self) -> Result<i64, sqlx::Error> {
        each!(self, store => store.money().await)
    }

    /// Closes the pools (on SQLite the last connection checkpoints the WAL into the file).
    pub async fn close(&self) {
        each!(self, store => store.close().await)
    }

    /// The three tools, on this database.
    pub fn tools(&self) -> Vec<Tool> {
        each!(self, store => vec![store.get_order(), store.cancel_order(), store.transfer()])
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
}

/// SQLite in WAL mode, the file created when missing. The tools' pool does not wait for
/// locks (`busy_timeout` 0): a collision is an immediate SQLITE_BUSY, retried by txretry.
/// The counting pool waits (a count is never lost to a busy database).
async fn sqlite(path: &Path, prefix: &Prefix) -> Result<Store<sqlx::Sqlite>, OpenError> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal);
    let counter = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options.clone().busy_timeout(Duration::from_secs(30)))
        .await
        .map_err(OpenError::Connect)?;
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_lazy_with(options.busy_timeout(Duration::ZERO));
    let store = Store::new(pool, counter, prefix);
    let mut conn = store.counter.acquire().await.map_err(OpenError::Connect)?;
    store.migrate(&mut conn).await?;
    Ok(store)
}

/// The orders tables on one backend: the pool the tools use, the pool that counts handler
/// runs, and the statements.
pub struct Store<DB: Backend> {
    pool: Pool<DB>,
    counter: Pool<DB>,
    sql: Arc<Statements>,
}

impl<DB: Backend> Clone for Store<DB> {
    fn clone(&self) -> Self {
        Store {
            pool: self.pool.clone(),
            counter: self.counter.clone(),
            sql: self.sql.clone(),
        }
    }
}

impl<DB: Backend> std::fmt::Debug for Store<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dialect", &DB::DIALECT)
            .finish_non_exhaustive()
    }
}

impl<DB: Backend> Store<DB> {
    fn new(pool: Pool<DB>, counter: Pool<DB>, prefix: &Prefix) -> Self {
        Store {
            pool,
            counter,
            sql: Arc::new(Statements::new(DB::DIALECT, prefix)),
        }
    }

    /// The pool the tools run their transactions on.
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }

    async fn migrate(&self, conn: &mut DB::Connection) -> Result<(), OpenError> {
        DB::script(conn, &self.sql.schema)
            .await
            .map_err(OpenError::Schema)
    }

    async fn handler_runs(&self, tool: &str) -> Result<i64, sqlx::Error> {
        let mut conn = self.counter.acquire().await?;
        let runs = DB::fetch_int(&mut conn, &self.sql.handler_runs, &[Bind::Text(tool)]).await?;
        Ok(runs.unwrap_or(0))
    }

    async fn money(&self) -> Result<i64, sqlx::Error> {
        let mut conn = self.counter.acquire().await?;
        // Summed here: SUM of a BIGINT is a NUMERIC on Postgres, a DECIMAL on MySQL.
        let balances = DB::fetch_ints(&mut conn, &self.sql.balances, &[]).await?;
        Ok(balances.into_iter().sum())
    }

    async fn close(&self) {
        self.pool.close().await;
        self.counter.close().await;
    }

    /// Counts a run of `tool`'s handler. A failure to count is not the call's failure.
    async fn count(&self, tool: &str) {
        let counted = async {
            let mut conn = self.counter.acquire().await?;
            DB::execute(&mut conn, &self.sql.count_run, &[Bind::Text(tool)]).await
        };
        if let Err(error) = counted.await {
            eprintln!("could not count a run of {tool}: {error}");
        }
    }

    fn get_order(&self) -> Tool {
        let store = self.clone();
        Tool::new(
            "get_order",
            "Look an order up by id: its account, status and amount in cents.",
            move |ctx: ToolContext, args: OrderId| {
                let store = store.clone();
                async move {
                    let read_only = TxOptions::new().read_only(true);
                    let sql = store.sql.clone();
                    let order = txretry_sqlx::transaction_with(
                        &store.pool,
                        ctx.policy(),
                        &read_only,
                        async move |tx| {
                            let row = DB::fetch_order(
                                &mut **tx,
                                &sql.select_order,
                                &[Bind::Int(args.order_id)],
                            )
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
                    store.count("get_order").await;
                    Ok::<_, BoxError>(order?)
                }
            },
        )
        .read_only(true)
        .idempotent(true)
    }

    fn cancel_order(&self) -> Tool {
        // Read, check, write: SERIALIZABLE on the servers, so two cancels of one order (or
        // two refunds from the shop's account) cannot both commit what they read (SQLite's
        // BEGIN IMMEDIATE, the default, already runs one writer at a time).
        let serializable = TxOptions::new().isolation(Isolation::Serializable);
        let store = self.clone();
        Tool::new(
            "cancel_order",
            "Cancel an open order and refund its amount to the customer's account.",
            move |ctx: ToolContext, args: OrderId| {
                let (store, serializable) = (store.clone(), serializable.clone());
                async move {
                    let call_id = ctx.call_id().to_owned();
                    let sql = store.sql.clone();
                    let refunded = txretry_sqlx::transaction_with(
                        &store.pool,
                        ctx.policy(),
                        &serializable,
                        async move |tx| {
                            let id = args.order_id;
                            let row =
                                DB::fetch_order(&mut **tx, &sql.select_order, &[Bind::Int(id)])
                                    .await?;
                            let (account, cents) = match row {
                                None => return Err(Refusal::OrderNotFound(id)),
                                Some((account, status, cents)) if status == "open" => {
                                    (account, cents)
                                }
                                Some((_, status, _)) => return Err(Refusal::NotOpen(id, status)),
                            };
                            DB::execute(&mut **tx, &sql.cancel_order, &[Bind::Int(id)]).await?;
                            for (account, delta) in [(0, -cents), (account, cents)] {
                                DB::execute(
                                    &mut **tx,
                                    &sql.add_cents,
                                    &[Bind::Int(delta), Bind::Int(account)],
                                )
                                .await?;
                                DB::execute(
                                    &mut **tx,
                                    &sql.ledger_refund,
                                    &[
                                        Bind::Text(&call_id),
                                        Bind::Int(id),
                                        Bind::Int(account),
                                        Bind::Int(delta),
                                    ],
                                )
                                .await?;
                            }
                            Ok(cents)
                        },
                    )
                    .await;
                    store.count("cancel_order").await;
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
        // Read first, write later. SQLite: DEFERRED, so two transfers that read the same
        // account collide for real (SQLITE_BUSY / SQLITE_BUSY_SNAPSHOT) and one is retried;
        // the servers: SERIALIZABLE, so neither overdraws on a stale balance.
        let options = TxOptions::new()
            .isolation(Isolation::Serializable)
            .sqlite_begin(SqliteBegin::Deferred);
        let store = self.clone();
        Tool::new(
            "transfer",
            "Move money between two accounts.",
            move |ctx: ToolContext, t: Transfer| {
                let (store, options) = (store.clone(), options.clone());
                async move {
                    let call_id = ctx.call_id().to_owned();
                    let sql = store.sql.clone();
                    let moved = txretry_sqlx::transaction_with(
                        &store.pool,
                        ctx.policy(),
                        &options,
                        async move |tx| {
                            if t.cents <= 0 {
                                return Err(Refusal::NotPositive(t.cents));
                            }
                            let balance =
                                DB::fetch_int(&mut **tx, &sql.balance, &[Bind::Int(t.from)])
                                    .await?;
                            let balance = balance.ok_or(Refusal::AccountNotFound(t.from))?;
                            if balance < t.cents {
                                return Err(Refusal::InsufficientFunds(t.from, balance, t.cents));
                            }
                            // Some thinking between the read and the write widens the window in
                            // which another transfer commits first.
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            for (account, delta) in [(t.from, -t.cents), (t.to, t.cents)] {
                                let updated = DB::execute(
                                    &mut **tx,
                                    &sql.add_cents,
                                    &[Bind::Int(delta), Bind::Int(account)],
                                )
                                .await?;
                                if updated == 0 {
                                    return Err(Refusal::AccountNotFound(account));
                                }
                                DB::execute(
                                    &mut **tx,
                                    &sql.ledger_transfer,
                                    &[Bind::Text(&call_id), Bind::Int(account), Bind::Int(delta)],
                                )
                                .await?;
                            }
                            Ok(t.cents)
                        },
                    )
                    .await;
                    store.count("transfer").await;
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
