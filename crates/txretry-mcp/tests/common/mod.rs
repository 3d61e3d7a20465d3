//! Shared by the txretry-mcp integration tests: the binary (`check`, `serve` over stdio or
//! streamable HTTP) driven by rmcp's real client, each test's own database (an SQLite file
//! in a temp directory, or a fresh database of its own on the Postgres or MariaDB server),
//! the config files the tests write, and the database read back with sqlx.

#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::str::FromStr;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult, ErrorCode, JsonObject, Tool};
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ErrorData, RoleClient, ServiceExt};
use serde_json::Value;
use sqlx::mysql::MySqlConnection;
use sqlx::postgres::PgConnection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{AssertSqlSafe, Connection};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_txretry-mcp");

pub type Client = RunningService<RoleClient, ()>;

pub const INVALID_PARAMS: ErrorCode = ErrorCode::INVALID_PARAMS;

/// The crate's `examples/` directory.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

/// An example file's text.
pub fn example(name: &str) -> String {
    std::fs::read_to_string(examples().join(name)).unwrap()
}

/// `url` with its host and port replaced by `addr`: what follows `user[:password]@`, or
/// `scheme://`.
pub fn via(url: &str, addr: std::net::SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, rest) = match rest.split_once('@') {
        Some((user, rest)) => (format!("{user}@"), rest),
        None => (String::new(), rest),
    };
    let path = rest.find(['/', '?']).map_or("", |at| &rest[at..]);
    format!("{scheme}://{user}{addr}{path}")
}

/// `url` with `query` appended (after `?` or `&`).
pub fn with_query(url: &str, query: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{query}")
}

/// A relay on loopback to a server that forwards both ways until [frozen](Self::freeze):
/// then it holds every byte and closes nothing, as a database host that stops answering
/// (a partition, a frozen machine).
pub struct FreezableRelay {
    /// The server's URL through the relay.
    pub url: String,
    frozen: tokio::sync::watch::Sender<bool>,
}

impl FreezableRelay {
    /// A relay to `url`'s server (host and port of a single-host URL).
    pub async fn start(url: &str) -> FreezableRelay {
        let options = sqlx::postgres::PgConnectOptions::from_str(url).unwrap();
        let upstream = format!("{}:{}", options.get_host(), options.get_port());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay = listener.local_addr().unwrap();
        let (frozen, watch) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (from_client, to_client) = inbound.into_split();
                let (from_server, to_server) = outbound.into_split();
                tokio::spawn(pump(from_client, to_server, watch.clone()));
                tokio::spawn(pump(from_server, to_client, watch.clone()));
            }
        });
        FreezableRelay {
            url: via(url, relay),
            frozen,
        }
    }

    /// From now on, nothing passes either way, and every connection stays open.
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }
}

/// Copies `from` to `to` until either ends, or for ever (holding both) once frozen.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut frozen: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0; 16 * 1024];
    loop {
        let read = tokio::select! {
            biased;
            _ = frozen.wait_for(|frozen| *frozen) => break,
            read = from.read(&mut buf) => read,
        };
        match read {
            Ok(n) if n > 0 && to.write_all(&buf[..n]).await.is_ok() => {}
            _ => return,
        }
    }
    // Frozen: hold both halves open, pass nothing.
    std::future::pending::<()>().await;
    drop((from, to));
}

/// A guard against hangs (not a timing assertion).
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(90), fut)
        .await
        .unwrap_or_else(|_| panic!("hung: {what}"))
}

/// Which database a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
    MariaDb,
}

/// One test's database: an SQLite file in a temp directory, or a database of its own on a
/// server (named after the test, dropped and created afresh when the test starts).
pub struct Db {
    pub kind: Kind,
    /// The URL the server under test is given.
    pub url: String,
    /// A temp directory for this test's files (configs, the SQLite file).
    pub dir: tempfile::TempDir,
}

/// FNV-1a of a test's path: a short name for its database.
fn hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

impl Db {
    pub async fn sqlite() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        // Created here: the server's pool does not create a missing file.
        let options = SqliteConnectOptions::from_str(&url)
            .unwrap()
            .create_if_missing(true);
        SqliteConnection::connect_with(&options)
            .await
            .unwrap()
            .close()
            .await
            .unwrap();
        Db {
            kind: Kind::Sqlite,
            url,
            dir,
        }
    }

    /// A fresh database of `test`'s own on the Postgres server; `None` (skipped, loudly)
    /// without a server, a failure with `TXRETRY_REQUIRE_DB=1`.
    pub async fn postgres(test: &str) -> Option<Db> {
        let admin = txretry_testkit::postgres_url(test)?;
        let name = format!("mcpt_{:016x}", hash(test));
        let mut conn = PgConnection::connect(&admin)
            .await
            .unwrap_or_else(|e| panic!("{test}: cannot connect to {admin}: {e}"));
        sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .execute(&mut conn)
        .await
        .unwrap();
        sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .unwrap();
        Some(Db {
            kind: Kind::Postgres,
            url: with_database(&admin, &name),
            dir: tempfile::tempdir().unwrap(),
        })
    }

    /// A fresh database of `test`'s own on the MariaDB server; as [`Db::postgres`].
    pub async fn mariadb(test: &str) -> Option<Db> {
        let admin = txretry_testkit::mysql_url(test)?;
        let name = format!("mcpt_{:016x}", hash(test));
        let mut conn = MySqlConnection::connect(&admin)
            .await
            .unwrap_or_else(|e| panic!("{test}: cannot connect to {admin}: {e}"));
        sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name}"
        )))
        .execute(&mut conn)
        .await
        .unwrap();
        Some(Db {
            kind: Kind::MariaDb,
            url: with_database(&admin, &name),
            dir: tempfile::tempdir().unwrap(),
        })
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

    /// Runs an example's SQL file (its tables and rows).
    pub async fn load(&self, sql_file: &str) {
        self.exec(&example(sql_file)).await;
    }

    /// Statements without results (several at once).
    pub async fn exec(&self, sql: &str) {
        let mut conn = self.connect().await;
        conn.run(sql).await;
        conn.close().await;
    }

    pub async fn ints(&self, sql: &str) -> Vec<i64> {
        let mut conn = self.connect().await;
        let ints = conn.ints(sql).await;
        conn.close().await;
        ints
    }

    pub async fn strings(&self, sql: &str) -> Vec<String> {
        let mut conn = self.connect().await;
        let strings = conn.strings(sql).await;
        conn.close().await;
        strings
    }

    /// Writes a config file in the test's directory; its path.
    pub fn write(&self, name: &str, yaml: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, yaml).unwrap();
        path
    }
}

/// `url` naming database `name` instead of its own.
fn with_database(url: &str, name: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, format!("?{query}")),
        None => (rest, String::new()),
    };
    let authority = rest.split('/').next().unwrap();
    format!("{scheme}://{authority}/{name}{query}")
}

/// A connection of the test's own, on any of the three databases.
pub enum Conn {
    Sqlite(SqliteConnection),
    Postgres(PgConnection),
    MariaDb(MySqlConnection),
}

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
    pub async fn run(&mut self, sql: &str) {
        let sql = sql.to_owned();
        on_conn!(self, conn => sqlx::raw_sql(AssertSqlSafe(sql)).execute(conn).await.map(drop))
            .unwrap();
    }

    pub async fn ints(&mut self, sql: &str) -> Vec<i64> {
        let sql = sql.to_owned();
        on_conn!(self, conn => sqlx::query_scalar(AssertSqlSafe(sql)).fetch_all(conn).await)
            .unwrap()
    }

    pub async fn strings(&mut self, sql: &str) -> Vec<String> {
        let sql = sql.to_owned();
        on_conn!(self, conn => sqlx::query_scalar(AssertSqlSafe(sql)).fetch_all(conn).await)
            .unwrap()
    }

    pub async fn close(self) {
        let _ = on_conn!(self, conn => conn.close().await);
    }
}

/// The scenarios `$name(db: Db)` of the calling file, each as a test on SQLite, Postgres
/// and MariaDB (`sqlite::name`, `postgres::name`, `mariadb::name`).
#[macro_export]
macro_rules! on_each_database {
    ($($scenario:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario($crate::common::Db::sqlite().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let test = concat!(module_path!(), "::", stringify!($scenario));
                    let Some(db) = $crate::common::Db::postgres(test).await else { return };
                    super::$scenario(db).await;
                }
            )*
        }
        mod mariadb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    let test = concat!(module_path!(), "::", stringify!($scenario));
                    let Some(db) = $crate::common::Db::mariadb(test).await else { return };
                    super::$scenario(db).await;
                }
            )*
        }
    };
}

/// What a run of the binary to its end gave.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the binary with `args` and `env` (stdin closed) to its end.
pub async fn run(args: &[&str], env: &[(&str, &str)]) -> Ran {
    let mut command = tokio::process::Command::new(BIN);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    let out = within(&format!("txretry-mcp {args:?}"), command.output())
        .await
        .unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `txretry-mcp check --config PATH`.
pub async fn check(path: &Path, env: &[(&str, &str)]) -> Ran {
    run(&["check", "--config", path.to_str().unwrap()], env).await
}

/// The binary serving `config` over stdio with `args` (`--role`, `--toolset`), and an rmcp
/// client of it.
pub async fn stdio(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Client {
    let mut command = tokio::process::Command::new(BIN);
    command.arg("serve").arg("--config").arg(config).args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    let transport = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
        .0;
    within("stdio initialize", ().serve(transport))
        .await
        .unwrap()
}

/// The binary serving streamable HTTP; killed on drop.
pub struct HttpServer {
    /// `http://ADDR/mcp`, as it printed it.
    pub url: String,
    pub child: tokio::process::Child,
}

impl HttpServer {
    /// `serve --config PATH --http ADDR`, once it printed where it listens.
    pub async fn start(config: &Path, addr: &str, env: &[(&str, &str)]) -> HttpServer {
        HttpServer::start_with(config, addr, &[], env).await
    }

    /// [`HttpServer::start`] with more flags.
    pub async fn start_with(
        config: &Path,
        addr: &str,
        flags: &[&str],
        env: &[(&str, &str)],
    ) -> HttpServer {
        let mut command = tokio::process::Command::new(BIN);
        command
            .arg("serve")
            .arg("--config")
            .arg(config)
            .arg("--http")
            .arg(addr)
            .args(flags)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = within("the server's address", lines.next_line())
            .await
            .unwrap()
            .expect("the server printed its address");
        let url = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line}"))
            .to_owned();
        HttpServer { url, child }
    }

    /// An rmcp client whose requests carry `Authorization: Bearer TOKEN` (none for `None`).
    pub async fn client(&self, token: Option<&str>) -> Client {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.clone());
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        within("http initialize", ().serve(transport))
            .await
            .unwrap()
    }
}

pub fn object(value: Value) -> JsonObject {
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
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments));
    within("tools/call", client.call_tool(params)).await
}

/// A call's outcome (its structured content), checked against its `isError`: set unless
/// it committed.
pub async fn outcome(client: &Client, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments.clone())
        .await
        .unwrap_or_else(|e| panic!("{tool} {arguments}: not a result: {e:?}"));
    outcome_of(&result)
}

pub fn outcome_of(result: &CallToolResult) -> Value {
    let outcome = result
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("no structured content: {result:?}"));
    let committed = outcome["status"] == "committed";
    assert_eq!(
        result.is_error,
        Some(!committed),
        "isError unless committed: {outcome}"
    );
    assert!(outcome["call_id"].is_string(), "{outcome}");
    assert!(outcome["attempts"].is_u64(), "{outcome}");
    outcome
}

/// The protocol error a call got (it must be one).
pub async fn protocol_error(client: &Client, tool: &str, arguments: Value) -> ErrorData {
    match call(client, tool, arguments).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("{tool}: expected a protocol error, got {other:?}"),
    }
}

pub async fn tools(client: &Client) -> Vec<Tool> {
    within("tools/list", client.list_all_tools()).await.unwrap()
}

pub async fn tool_names(client: &Client) -> Vec<String> {
    tools(client)
        .await
        .into_iter()
        .map(|tool| tool.name.into_owned())
        .collect()
}

/// What orders.sql leaves in the accounts, and the ledger: (balances by id, ledger rows).
pub async fn money(db: &Db) -> (Vec<i64>, Vec<String>) {
    (
        db.ints("SELECT cents FROM accounts ORDER BY id").await,
        db.strings("SELECT request_id FROM ledger ORDER BY request_id")
            .await,
    )
}
