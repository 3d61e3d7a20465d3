//! Shared setup: the shop (three tools on an SQLite file in a temp directory), a writer that
//! holds SQLite's write lock so that the tools' transactions fail for real, the database's
//! state read back, a client that records the notifications it receives, and the server
//! served to it over an in-memory pipe or streamable HTTP.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorCode, JsonObject, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Connection, SqlitePool};
use tokio::sync::watch;
use txretry_core::{Backoff, Jitter, RetryPolicy, SqliteBegin, TxOptions};
use txretry_tool::mcp::ToolboxServer;
use txretry_tool::{BoxError, Tool, ToolContext, Toolbox, ToolboxBuilder};

pub type Client = RunningService<RoleClient, Recorder>;

/// The money in the seeded accounts (account 0 is the shop's), which no tool changes.
pub const TOTAL_CENTS: i64 = 140_000;

/// A guard against hangs (not a timing assertion).
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("hung: {what}"))
}

/// The toolbox's policy: up to `max_attempts` per call (shared by every loop in it),
/// exponential backoff from 2 ms, at most 50 ms, full jitter.
pub fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(max_attempts)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(2),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(50))
        .jitter(Jitter::Full)
        .build()
        .unwrap()
}

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

/// An MCP client that keeps every log message, progress notification and list change it
/// receives.
#[derive(Clone)]
pub struct Recorder {
    logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    list_changes: Arc<Mutex<u32>>,
    events: Arc<watch::Sender<u64>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            logs: Arc::default(),
            progress: Arc::default(),
            list_changes: Arc::default(),
            events: Arc::new(watch::channel(0).0),
        }
    }
}

impl Recorder {
    pub fn logs(&self) -> Vec<LoggingMessageNotificationParam> {
        self.logs.lock().unwrap().clone()
    }

    pub fn progress(&self) -> Vec<ProgressNotificationParam> {
        self.progress.lock().unwrap().clone()
    }

    pub fn list_changes(&self) -> u32 {
        *self.list_changes.lock().unwrap()
    }

    /// Waits until `done` holds for what was recorded.
    pub async fn wait_until(&self, what: &str, done: impl Fn(&Recorder) -> bool) {
        let mut events = self.events.subscribe();
        within(what, async {
            while !done(self) {
                events.changed().await.unwrap();
            }
        })
        .await;
    }

    fn bump(&self) {
        self.events.send_modify(|n| *n += 1);
    }
}

impl ClientHandler for Recorder {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params);
        self.bump();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
        self.bump();
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        *self.list_changes.lock().unwrap() += 1;
        self.bump();
    }
}

/// Serves `server` on one end of an in-memory pipe (as it would serve stdio) and connects a
/// recorded client to the other.
pub async fn connect(server: ToolboxServer, recorder: Recorder) -> Client {
    let (server_end, client_end) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_end).await {
            let _ = running.waiting().await;
        }
    });
    within("initialize", recorder.serve(client_end))
        .await
        .unwrap()
}

/// `server` over streamable HTTP at `http://127.0.0.1:PORT/mcp` (rmcp's service on axum,
/// every session a clone of the server, as rmcp's service needs). Stopped on drop.
pub struct HttpServer {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl HttpServer {
    pub async fn start(server: ToolboxServer) -> HttpServer {
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let router = axum::Router::new().nest_service("/mcp", service);
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        HttpServer { url, task }
    }

    /// A client whose requests carry these headers.
    pub async fn client(&self, headers: &[(&str, &str)], recorder: Recorder) -> Client {
        let headers = headers
            .iter()
            .map(|(name, value)| {
                (
                    http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    http::HeaderValue::from_str(value).unwrap(),
                )
            })
            .collect();
        let config =
            StreamableHttpClientTransportConfig::with_uri(self.url.clone()).custom_headers(headers);
        let transport = StreamableHttpClientTransport::from_config(config);
        within("http initialize", recorder.serve(transport))
            .await
            .unwrap()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

pub async fn call(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args(arguments));
    within("tools/call", client.call_tool(params)).await
}

/// The protocol error a call got (it must be one).
pub async fn protocol_error(client: &Client, tool: &str, arguments: Value) -> ErrorData {
    match call(client, tool, arguments).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("{tool}: expected a protocol error, got {other:?}"),
    }
}

/// `-32602`: an unknown tool, a tool not offered, invalid arguments.
pub const INVALID_PARAMS: ErrorCode = ErrorCode::INVALID_PARAMS;

/// `error`, a refusal of the tool `name`, is `like` (a refusal of `like_name`) but for the
/// name: the same code, message and data, so a caller cannot tell the two apart.
pub fn assert_refused_alike(error: &ErrorData, name: &str, like: &ErrorData, like_name: &str) {
    assert_eq!(
        (
            error.code,
            error.message.replace(name, like_name),
            &error.data
        ),
        (like.code, like.message.to_string(), &like.data),
        "{name} vs {like_name}"
    );
}

/// The text of a result's first block.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .first()
        .and_then(|block| block.as_text())
        .map(|text| text.text.clone())
        .unwrap_or_default()
}

pub async fn tool_names(client: &Client) -> Vec<String> {
    within("tools/list", client.list_all_tools())
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.into_owned())
        .collect()
}

/// The outcome of N concurrent `cancel_order` calls: per order, the calls that cancelled it,
/// and the texts of the ones refused as already cancelled.
#[derive(Debug, Default)]
pub struct Cancels {
    pub cancelled: HashMap<i64, u32>,
    pub already: Vec<String>,
    pub other: Vec<String>,
}

/// `calls` concurrent `cancel_order` calls spread over `orders`; every one must return a
/// result (not a protocol error).
pub async fn cancel_concurrently(client: &Client, orders: &[i64], calls: usize) -> Cancels {
    let mut set = tokio::task::JoinSet::new();
    for i in 0..calls {
        let peer = client.peer().clone();
        let order = orders[i % orders.len()];
        set.spawn(async move {
            let params = CallToolRequestParams::new("cancel_order")
                .with_arguments(args(json!({ "order_id": order })));
            (order, peer.call_tool(params).await)
        });
    }
    let mut cancels = Cancels::default();
    while let Some(joined) = within("concurrent calls", set.join_next()).await {
        let (order, result) = joined.unwrap();
        let result = result.unwrap_or_else(|e| panic!("order {order}: not a result: {e:?}"));
        if result.is_error == Some(true) {
            let text = text(&result);
            if text == format!("cancel_order: order {order} is already cancelled") {
                cancels.already.push(text);
            } else {
                cancels.other.push(text);
            }
        } else {
            let output = result
                .structured_content
                .clone()
                .expect("structured output");
            assert_eq!(output["cancelled"], order, "{output}");
            *cancels.cancelled.entry(order).or_default() += 1;
        }
    }
    cancels
}

/// The retries the client was told of: at least one (the contention was real), each a
/// busy database, each for `tool`.
pub async fn assert_retried(recorder: &Recorder, tool: &str) {
    recorder
        .wait_until("a retry notification", |r| !r.logs().is_empty())
        .await;
    let logs = recorder.logs();
    for log in &logs {
        assert_eq!(log.data["tool"], tool, "{logs:?}");
        assert_eq!(log.data["kind"], "busy", "{logs:?}");
    }
}

/// What every `cancel_concurrently` over orders 1, 2, 4, 5 must leave behind.
pub async fn assert_each_cancelled_once(shop: &Shop, cancels: &Cancels, calls: usize) {
    let orders = [1, 2, 4, 5];
    assert!(cancels.other.is_empty(), "{cancels:?}");
    for order in orders {
        assert_eq!(
            cancels.cancelled.get(&order),
            Some(&1),
            "order {order}: {cancels:?}"
        );
    }
    assert_eq!(cancels.already.len(), calls - orders.len(), "{cancels:?}");
    let state = shop.state().await;
    for order in orders {
        assert_eq!(state.status[&order], "cancelled", "{state:?}");
        assert_eq!(
            state.refunds.get(&order),
            Some(&1),
            "refunded once: {state:?}"
        );
    }
    assert_eq!(state.ledger_rows, 2 * orders.len() as i64, "{state:?}");
    assert_eq!(state.ledger_sum, 0, "the ledger balances: {state:?}");
    assert_eq!(state.money, TOTAL_CENTS, "no money made or lost: {state:?}");
    assert_eq!(
        shop.runs("cancel_order"),
        calls as i64,
        "each call ran its handler once; the failed transactions were retried in place: {state:?}"
    );
}
