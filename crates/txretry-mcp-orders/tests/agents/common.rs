//! Shared setup: the server binary as a child (stdio or HTTP), a client that records the
//! notifications it receives, a writer that holds the SQLite write lock, and the database's
//! state read back.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorCode, JsonObject, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::Value;
use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;

pub const SERVER: &str = env!("CARGO_BIN_EXE_txretry-mcp-orders");

pub type Client = RunningService<RoleClient, Recorder>;

/// A guard against hangs (not a timing assertion).
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("hung: {what}"))
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

/// A temp directory for one test's database file.
pub struct Db {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Db {
    pub fn new() -> Db {
        let dir = tempfile::tempdir().unwrap();
        Db {
            path: dir.path().join("orders.db"),
            _dir: dir,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn url(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }

    pub async fn connect(&self) -> SqliteConnection {
        SqliteConnection::connect_with(
            &SqliteConnectOptions::new()
                .filename(&self.path)
                .busy_timeout(Duration::from_secs(30)),
        )
        .await
        .unwrap()
    }

    /// Another writer that takes the write lock (`BEGIN IMMEDIATE`), so the server's
    /// transactions fail with a real SQLITE_BUSY until it is released.
    pub async fn hold(&self) -> Holder {
        let mut conn = self.connect().await;
        sqlx::raw_sql("BEGIN IMMEDIATE")
            .execute(&mut conn)
            .await
            .unwrap();
        Holder(conn)
    }

    pub async fn state(&self) -> State {
        let mut conn = self.connect().await;
        let orders: Vec<(i64, String)> = sqlx::query_as("SELECT id, status FROM orders")
            .fetch_all(&mut conn)
            .await
            .unwrap();
        let refunds: Vec<(i64, i64)> = sqlx::query_as(
            "SELECT order_id, count(*) FROM ledger WHERE order_id IS NOT NULL AND account <> 0
             GROUP BY order_id",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        State {
            status: orders.into_iter().collect(),
            refunds: refunds.into_iter().collect(),
            ledger_sum: scalar(&mut conn, "SELECT coalesce(sum(cents), 0) FROM ledger").await,
            ledger_rows: scalar(&mut conn, "SELECT count(*) FROM ledger").await,
            money: scalar(&mut conn, "SELECT sum(cents) FROM accounts").await,
            cancel_runs: scalar(
                &mut conn,
                "SELECT coalesce(max(runs), 0) FROM handler_runs WHERE tool = 'cancel_order'",
            )
            .await,
            transfer_runs: scalar(
                &mut conn,
                "SELECT coalesce(max(runs), 0) FROM handler_runs WHERE tool = 'transfer'",
            )
            .await,
        }
    }
}

async fn scalar(conn: &mut SqliteConnection, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(conn).await.unwrap()
}

pub struct Holder(SqliteConnection);

impl Holder {
    pub async fn release(mut self) {
        sqlx::raw_sql("ROLLBACK")
            .execute(&mut self.0)
            .await
            .unwrap();
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
    pub cancel_runs: i64,
    pub transfer_runs: i64,
}

/// The server binary over stdio, with these extra arguments, on `db`.
pub async fn stdio(db: &Db, args: &[&str], recorder: Recorder) -> Client {
    let mut command = tokio::process::Command::new(SERVER);
    command.arg("--db").arg(db.url()).args(args);
    // Keep the caller's identity from leaking in from the environment.
    for var in ["TXRETRY_ROLES", "TXRETRY_PERSONA", "TXRETRY_AGENT"] {
        command.env_remove(var);
    }
    let transport = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
        .0;
    within("stdio initialize", recorder.serve(transport))
        .await
        .unwrap()
}

/// The server binary serving streamable HTTP on 127.0.0.1 (a port it picks). Killed on drop.
pub struct HttpServer {
    pub url: String,
    _child: tokio::process::Child,
}

impl HttpServer {
    pub async fn start(db: &Db, args: &[&str]) -> HttpServer {
        let mut child = tokio::process::Command::new(SERVER)
            .arg("--http")
            .arg("127.0.0.1:0")
            .arg("--db")
            .arg(db.url())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = within("the server's address", lines.next_line())
            .await
            .unwrap()
            .expect("the server printed its address");
        let url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line}"))
            .to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        HttpServer { url, _child: child }
    }

    /// A client whose requests carry these `x-txretry-*` headers.
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

pub const INVALID_PARAMS: ErrorCode = ErrorCode::INVALID_PARAMS;

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
                .with_arguments(args(serde_json::json!({ "order_id": order })));
            (order, peer.call_tool(params).await)
        });
    }
    let mut cancels = Cancels::default();
    while let Some(joined) = within("16 concurrent calls", set.join_next()).await {
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

/// What every `cancel_concurrently` over orders 1, 2, 4, 5 must leave behind.
pub async fn assert_each_cancelled_once(db: &Db, cancels: &Cancels, calls: usize) {
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
    let state = db.state().await;
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
    assert_eq!(
        state.money,
        txretry_mcp_orders::orders::TOTAL_CENTS,
        "no money made or lost: {state:?}"
    );
    assert_eq!(
        state.cancel_runs, calls as i64,
        "each call ran its handler once; the busy transactions were retried in place: {state:?}"
    );
}
