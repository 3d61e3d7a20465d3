//! Shared setup: the server binary as a child (stdio or HTTP), a client that records the
//! notifications it receives, the test's database (SQLite, Postgres or MariaDB), a writer
//! that holds locks so that the server's transactions fail for real, and the database's
//! state read back.

use std::collections::HashMap;
use std::process::Stdio;
use std::str::FromStr;
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
use sqlx::mysql::MySqlConnection;
use sqlx::postgres::PgConnection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{AssertSqlSafe, Connection};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;
use txretry_mcp_orders::orders::Orders;
use txretry_mcp_orders::orders::dialect::Prefix;
use txretry_testkit::wait::poll_until;

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

/// Which database a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
    MariaDb,
}

/// One test's database: an SQLite file in a temp directory, or tables of their own (a
/// prefix derived from the test's name, dropped before the test) on a server.
pub struct Db {
    kind: Kind,
    url: String,
    prefix: String,
    _dir: Option<tempfile::TempDir>,
}

/// A connection of the test's own, on any of the three databases.
pub enum Conn {
    Sqlite(SqliteConnection),
    Postgres(PgConnection),
    MariaDb(MySqlConnection),
}

/// `$body` with `$conn` bound to whichever connection `$self` holds.
macro_rules! on_conn {
    ($self:expr, $conn:ident => $body:expr) => {
        match $self {
            Conn::Sqlite($conn) => $body,
            Conn::Postgres($conn) => $body,
            Conn::MariaDb($conn) => $body,
        }
    };
}

impl Conn {
    /// Statements without results (several at once).
    pub async fn run(&mut self, sql: String) {
        on_conn!(self, conn => sqlx::raw_sql(AssertSqlSafe(sql)).execute(conn).await.map(drop))
            .unwrap();
    }

    pub async fn ints(&mut self, sql: String) -> Vec<i64> {
        on_conn!(self, conn => sqlx::query_scalar(AssertSqlSafe(sql)).fetch_all(conn).await)
            .unwrap()
    }

    pub async fn strings(&mut self, sql: String) -> Vec<String> {
        on_conn!(self, conn => sqlx::query_scalar(AssertSqlSafe(sql)).fetch_all(conn).await)
            .unwrap()
    }

    async fn statuses(&mut self, sql: String) -> Vec<(i64, String)> {
        on_conn!(self, conn => sqlx::query_as(AssertSqlSafe(sql)).fetch_all(conn).await).unwrap()
    }

    async fn counts(&mut self, sql: String) -> Vec<(i64, i64)> {
        on_conn!(self, conn => sqlx::query_as(AssertSqlSafe(sql)).fetch_all(conn).await).unwrap()
    }

    /// How many of the server's transactions wait to update `orders` (which
    /// [`Db::hold`] holds, so that an update of it cannot finish).
    async fn waiting_writers(&mut self, orders: &str) -> i64 {
        let pattern = format!("UPDATE {orders} %");
        match self {
            Conn::Sqlite(_) => unreachable!("SQLite's writers do not wait here"),
            Conn::Postgres(conn) => sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE wait_event_type = 'Lock' AND query LIKE $1",
            )
            .bind(pattern)
            .fetch_one(conn)
            .await
            .unwrap(),
            // The process list, not information_schema.innodb_trx: InnoDB refreshes that
            // only after 100 ms without a read, which polling tests never leave it.
            Conn::MariaDb(conn) => sqlx::query_scalar(
                "SELECT count(*) FROM information_schema.processlist WHERE info LIKE ?",
            )
            .bind(pattern)
            .fetch_one(conn)
            .await
            .unwrap(),
        }
    }
}

/// What a retry looks like on each database, as the client is told.
pub struct Expected {
    /// The transient kinds the retries may report.
    pub kinds: &'static [&'static str],
    /// How the code of each starts.
    pub code: &'static str,
    /// A word of the driver's error text, which must stay in the server.
    pub driver_text: &'static str,
}

impl Db {
    pub fn sqlite() -> Db {
        let dir = tempfile::tempdir().unwrap();
        Db {
            kind: Kind::Sqlite,
            url: format!("sqlite:{}", dir.path().join("orders.db").display()),
            prefix: String::new(),
            _dir: Some(dir),
        }
    }

    /// The Postgres server for `test`, its tables dropped; `None` (skipped) without one.
    pub async fn postgres(test: &str) -> Option<Db> {
        let url = txretry_testkit::postgres_url(test)?;
        Some(Db::server(Kind::Postgres, url, test).await)
    }

    /// The MariaDB server for `test`, its tables dropped; `None` (skipped) without one.
    pub async fn mariadb(test: &str) -> Option<Db> {
        let url = txretry_testkit::mysql_url(test)?;
        Some(Db::server(Kind::MariaDb, url, test).await)
    }

    async fn server(kind: Kind, url: String, test: &str) -> Db {
        // Tests run at once, on one server: each has tables of its own, named after it
        // (FNV-1a of its path), and those a previous run left are dropped.
        let hash = test.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        });
        let db = Db {
            kind,
            url,
            prefix: format!("mcp_{hash:016x}_"),
            _dir: None,
        };
        db.connect()
            .await
            .run(format!(
                "DROP TABLE IF EXISTS {p}accounts, {p}orders, {p}ledger, {p}handler_runs",
                p = db.prefix
            ))
            .await;
        db
    }

    /// The server's arguments for this database.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--db".to_owned(),
            self.url.clone(),
            "--table-prefix".to_owned(),
            self.prefix.clone(),
        ]
    }

    /// The orders tables, opened in this process.
    pub async fn open(&self) -> Orders {
        let target = self.url.parse().unwrap();
        Orders::open(&target, &Prefix::new(&self.prefix).unwrap())
            .await
            .unwrap()
    }

    /// A table's name with this test's prefix.
    pub fn table(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    pub async fn connect(&self) -> Conn {
        match self.kind {
            Kind::Sqlite => Conn::Sqlite(
                SqliteConnection::connect_with(
                    &SqliteConnectOptions::from_str(&self.url)
                        .unwrap()
                        .busy_timeout(Duration::from_secs(30)),
                )
                .await
                .unwrap(),
            ),
            Kind::Postgres => Conn::Postgres(PgConnection::connect(&self.url).await.unwrap()),
            Kind::MariaDb => Conn::MariaDb(MySqlConnection::connect(&self.url).await.unwrap()),
        }
    }

    pub fn expected_retries(&self) -> Expected {
        match self.kind {
            Kind::Sqlite => Expected {
                kinds: &["busy"],
                code: "SQLite code ",
                driver_text: "locked",
            },
            // Serialization failures (40001) when the lock holder commits; a deadlock
            // (40P01) between the server's own transactions is possible too.
            Kind::Postgres => Expected {
                kinds: &["serialization_failure", "deadlock"],
                code: "SQLSTATE 40",
                driver_text: "serialize",
            },
            Kind::MariaDb => Expected {
                kinds: &["deadlock"],
                code: "MySQL error 1213",
                driver_text: "Deadlock found",
            },
        }
    }

    /// Holds the open orders 1, 2, 4 and 5 so that the server's transactions on them fail
    /// for real once [`Holder::release_when_contended`] lets go:
    ///
    /// - SQLite: the write lock (`BEGIN IMMEDIATE`): SQLITE_BUSY while it is held;
    /// - Postgres: the rows, updated in a transaction; the server's SERIALIZABLE
    ///   transactions that wait for them fail with 40001 when it commits;
    /// - MariaDB: a shared lock on the rows (which the server's SERIALIZABLE reads share),
    ///   then, once a server transaction waits to write one, a write of its own: a
    ///   deadlock (1213). InnoDB rolls back the transaction that changed fewer rows: the
    ///   holder changes (and changes back) every account first, so that is the server's.
    pub async fn hold(&self) -> Holder {
        let mut conn = self.connect().await;
        let p = &self.prefix;
        conn.run(match self.kind {
            Kind::Sqlite => "BEGIN IMMEDIATE".to_owned(),
            Kind::Postgres => {
                format!("BEGIN; UPDATE {p}orders SET status = status WHERE id IN (1, 2, 4, 5)")
            }
            Kind::MariaDb => format!(
                "START TRANSACTION;
                 UPDATE {p}accounts SET cents = cents + 1;
                 UPDATE {p}accounts SET cents = cents - 1;
                 SELECT id FROM {p}orders WHERE id IN (1, 2, 4, 5) LOCK IN SHARE MODE"
            ),
        })
        .await;
        let watch = match self.kind {
            Kind::Sqlite => None,
            Kind::Postgres | Kind::MariaDb => Some(self.connect().await),
        };
        Holder {
            conn,
            watch,
            kind: self.kind,
            orders: self.table("orders"),
        }
    }

    pub async fn state(&self) -> State {
        let mut conn = self.connect().await;
        let p = &self.prefix;
        let orders = conn
            .statuses(format!("SELECT id, status FROM {p}orders"))
            .await;
        let refunds = conn
            .counts(format!(
                "SELECT order_id, count(*) FROM {p}ledger
                 WHERE order_id IS NOT NULL AND account <> 0 GROUP BY order_id"
            ))
            .await;
        // Summed here: SUM of a BIGINT is a NUMERIC on Postgres, a DECIMAL on MariaDB.
        let ledger = conn.ints(format!("SELECT cents FROM {p}ledger")).await;
        let money = conn.ints(format!("SELECT cents FROM {p}accounts")).await;
        let mut runs = async |tool: &str| {
            let runs = conn
                .ints(format!(
                    "SELECT runs FROM {p}handler_runs WHERE tool = '{tool}'"
                ))
                .await;
            runs.first().copied().unwrap_or(0)
        };
        let cancel_runs = runs("cancel_order").await;
        let transfer_runs = runs("transfer").await;
        State {
            status: orders.into_iter().collect(),
            refunds: refunds.into_iter().collect(),
            ledger_sum: ledger.iter().sum(),
            ledger_rows: ledger.len() as i64,
            money: money.iter().sum(),
            cancel_runs,
            transfer_runs,
        }
    }
}

/// The locks [`Db::hold`] took.
pub struct Holder {
    conn: Conn,
    watch: Option<Conn>,
    kind: Kind,
    orders: String,
}

impl Holder {
    /// Lets go without having caused anything more.
    pub async fn release(mut self) {
        self.conn.run("ROLLBACK".to_owned()).await;
    }

    /// Waits until the server's transactions collide with the locks, then lets go so that
    /// they fail for real (see [`Db::hold`]) and are retried: on SQLite, until the client
    /// hears of a retry (a log message or progress); on the servers, until one of the
    /// server's transactions waits for a lock on the orders.
    pub async fn release_when_contended(mut self, recorder: &Recorder) {
        match self.kind {
            Kind::Sqlite => {
                recorder
                    .wait_until("a retry notification", |r| {
                        !r.logs().is_empty() || !r.progress().is_empty()
                    })
                    .await;
                self.conn.run("ROLLBACK".to_owned()).await;
            }
            Kind::Postgres | Kind::MariaDb => {
                let watch = self.watch.as_mut().unwrap();
                let orders = &self.orders;
                poll_until("a server transaction waits for the held rows", async || {
                    watch.waiting_writers(orders).await > 0
                })
                .await;
                if self.kind == Kind::MariaDb {
                    // The write that closes the cycle; it returns once InnoDB rolled the
                    // server's transaction back.
                    self.conn
                        .run(format!(
                            "UPDATE {orders} SET status = status WHERE id IN (1, 2, 4, 5)"
                        ))
                        .await;
                }
                self.conn.run("COMMIT".to_owned()).await;
            }
        }
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
    command.args(db.args()).args(args);
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
            .args(db.args())
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

/// The retries the client was told of: at least one (the contention was real), each of a
/// kind this database reports, each for `tool`.
pub async fn assert_retried(db: &Db, recorder: &Recorder, tool: &str) {
    recorder
        .wait_until("a retry notification", |r| !r.logs().is_empty())
        .await;
    let expected = db.expected_retries();
    let logs = recorder.logs();
    for log in &logs {
        assert_eq!(log.data["tool"], tool, "{logs:?}");
        let kind = log.data["kind"].as_str().unwrap_or_default();
        assert!(expected.kinds.contains(&kind), "{kind}: {logs:?}");
    }
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
        "each call ran its handler once; the failed transactions were retried in place: {state:?}"
    );
}
