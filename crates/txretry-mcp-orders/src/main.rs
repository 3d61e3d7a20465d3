//! `txretry-mcp-orders`: a real MCP server over txretry-tool. It serves the orders toolbox
//! (`get_order`, `cancel_order`, `transfer`) on an embedded SQLite database, or on Postgres
//! or MySQL/MariaDB, with every transaction retried in place by txretry and every retry
//! reported to the client.
//!
//! ```text
//! txretry-mcp-orders [--db URL] [--table-prefix P] [--role ROLE]... [--persona NAME] [--agent NAME]
//! txretry-mcp-orders --http 127.0.0.1:PORT [--db URL] [--table-prefix P]
//! ```
//!
//! See `USAGE` below (or `--help`).

mod redact;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::Implementation;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use txretry_core::RetryPolicy;
use txretry_mcp_orders::orders::dialect::Prefix;
use txretry_mcp_orders::orders::target::Target;
use txretry_mcp_orders::orders::{OpenError, Orders, policy};
use txretry_tool::mcp::{RetryRelay, ToolboxServer};
use txretry_tool::{BoxError, Caller, Toolbox};

const USAGE: &str = "\
txretry-mcp-orders: an MCP server with the tools get_order, cancel_order and transfer on an
embedded SQLite database, or on Postgres or MySQL/MariaDB; deadlocks, serialization
failures and SQLITE_BUSY are retried in place by txretry and reported to the client as
notifications/message (warning) and progress.

USAGE:
    txretry-mcp-orders [OPTIONS]                      stdio (what MCP hosts start)
    txretry-mcp-orders --http 127.0.0.1:PORT [OPTIONS] streamable HTTP at /mcp

OPTIONS:
    --db URL             sqlite:PATH (the file is created when missing),
                         postgres://USER[:PASSWORD]@HOST[:PORT]/DB or
                         mysql://USER[:PASSWORD]@HOST[:PORT]/DB (MySQL or MariaDB);
                         the tables are created and seeded when missing;
                         default: a new SQLite file in a temp directory, removed on exit
    --table-prefix P     prefix of the tables' names ([a-z_][a-z0-9_]*, default none),
                         so that several servers can share one database
    --http ADDR          serve streamable HTTP on ADDR (a loopback address only;
                         port 0 picks one); prints `listening on http://ADDR/mcp`
    --role ROLE          stdio: a role of the caller (repeat, or comma-separate);
                         support: cancel_order, teller: transfer
    --persona NAME       stdio: the caller's persona (agent: every tool, viewer: get_order)
    --agent NAME         stdio: the caller's agent
    --max-attempts N     attempts per tool call, shared by every retry loop in it (default 10)
    -h, --help           this text

The stdio caller can also come from TXRETRY_ROLES, TXRETRY_PERSONA and TXRETRY_AGENT; with
none of them the session is offered nothing. Over HTTP each request names its caller in the
headers x-txretry-roles (required, comma-separated), x-txretry-persona and x-txretry-agent.
";

const INSTRUCTIONS: &str = "Orders and accounts of a small shop. Temporary database \
failures (deadlocks, busy database) are retried by the server: a tool error is final, do not \
call the tool again in a loop. Amounts are in cents.";

#[derive(Default)]
struct Options {
    /// The database and its URL as given (printed with the password redacted).
    db: Option<(Target, String)>,
    prefix: Prefix,
    http: Option<SocketAddr>,
    roles: Option<Vec<String>>,
    persona: Option<String>,
    agent: Option<String>,
    max_attempts: Option<u32>,
    help: bool,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
        let mut options = Options::default();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => {
                    (flag.to_owned(), Some(value.to_owned()))
                }
                _ => (arg, None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| format!("{flag} needs a value"))
            };
            match flag.as_str() {
                "-h" | "--help" => options.help = true,
                "--db" => {
                    let url = value()?;
                    let target = url
                        .parse()
                        .map_err(|error| format!("--db {}: {error}", redact::url(&url)))?;
                    options.db = Some((target, url));
                }
                "--table-prefix" => {
                    options.prefix =
                        Prefix::new(&value()?).map_err(|e| format!("--table-prefix: {e}"))?
                }
                "--http" => options.http = Some(loopback(&value()?)?),
                "--role" | "--roles" => options
                    .roles
                    .get_or_insert_with(Vec::new)
                    .extend(split(&value()?)),
                "--persona" => options.persona = Some(value()?),
                "--agent" => options.agent = Some(value()?),
                "--max-attempts" => {
                    let n = value()?;
                    options.max_attempts = Some(
                        n.parse()
                            .map_err(|_| format!("--max-attempts: not a number: {n}"))?,
                    );
                }
                other => return Err(format!("unknown argument {other:?} (see --help)")),
            }
        }
        Ok(options)
    }

    /// The stdio session's caller: the flags, else the environment; none at all: unresolved.
    fn stdio_caller(&self) -> Option<Caller> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let roles = self
            .roles
            .clone()
            .or_else(|| env("TXRETRY_ROLES").map(|roles| split(&roles).collect()));
        let persona = self.persona.clone().or_else(|| env("TXRETRY_PERSONA"));
        let agent = self.agent.clone().or_else(|| env("TXRETRY_AGENT"));
        if roles.is_none() && persona.is_none() && agent.is_none() {
            return None;
        }
        let mut caller = Caller::new(roles.unwrap_or_default());
        if let Some(persona) = persona {
            caller = caller.persona(persona);
        }
        if let Some(agent) = agent {
            caller = caller.agent(agent);
        }
        Some(caller)
    }
}

fn split(list: &str) -> impl Iterator<Item = String> + '_ {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(str::to_owned)
}

fn loopback(addr: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|_| format!("--http {addr:?}: expected an address such as 127.0.0.1:8080"))?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "--http {addr}: this demo serves loopback addresses only (127.0.0.1, [::1])"
        ));
    }
    Ok(addr)
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("txretry-mcp-orders: {failure}");
            failure.exit_code()
        }
    }
}

/// Why the server stopped: what the user can fix (exit 2) or anything else (exit 1).
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
    /// The database named by --db cannot be opened.
    #[error("--db {url}: {error}")]
    Database { url: String, error: OpenError },
    /// The server failed while running.
    #[error(transparent)]
    Serve(#[from] BoxError),
}

impl Failure {
    fn exit_code(&self) -> ExitCode {
        match self {
            Failure::Usage(_) | Failure::Database { .. } => ExitCode::from(2),
            Failure::Serve(_) => ExitCode::FAILURE,
        }
    }
}

async fn run() -> Result<(), Failure> {
    let options = Options::parse(std::env::args().skip(1)).map_err(Failure::Usage)?;
    if options.help {
        print!("{USAGE}");
        return Ok(());
    }
    if options.http.is_some()
        && (options.roles.is_some() || options.persona.is_some() || options.agent.is_some())
    {
        return Err(Failure::Usage("--role/--persona/--agent are for stdio; over HTTP the callers come from the x-txretry-* headers".into()));
    }
    let policy = policy(options.max_attempts.unwrap_or(10))
        .map_err(|error| Failure::Usage(format!("--max-attempts: {error}")))?;

    // The temp directory lives as long as the server.
    let (_dir, target, shown) = match &options.db {
        Some((target, url)) => (None, target.clone(), redact::url(url)),
        None => {
            let dir = tempfile::tempdir().map_err(|e| Failure::Serve(e.into()))?;
            let path = dir.path().join("orders.db");
            let shown = format!("sqlite:{}", path.display());
            (Some(dir), Target::Sqlite(path), shown)
        }
    };
    let orders = Orders::open(&target, &options.prefix)
        .await
        .map_err(|error| Failure::Database {
            url: shown.clone(),
            error,
        })?;
    eprintln!("txretry-mcp-orders: database {shown}");
    serve(options, policy, orders).await.map_err(Failure::Serve)
}

/// Serves the orders toolbox over stdio or HTTP until the client leaves or a signal comes.
async fn serve(options: Options, policy: RetryPolicy, orders: Orders) -> Result<(), BoxError> {
    let relay = RetryRelay::new();
    let builder = Toolbox::builder().policy(policy).on_retry(relay.hook());
    let toolbox = orders.toolbox(builder)?;
    let info = Implementation::new("txretry-mcp-orders", env!("CARGO_PKG_VERSION"));

    match options.http {
        None => {
            let caller = options.stdio_caller();
            if caller.is_none() {
                eprintln!(
                    "txretry-mcp-orders: no --role/--persona/--agent (nor TXRETRY_ROLES/_PERSONA/_AGENT): this session is offered nothing"
                );
            }
            let server = ToolboxServer::for_caller(toolbox, caller)
                .with_relay(relay)
                .with_server_info(info)
                .with_instructions(INSTRUCTIONS);
            // Until the client closes stdin.
            server
                .serve(rmcp::transport::stdio())
                .await?
                .waiting()
                .await?;
        }
        Some(addr) => {
            let server = ToolboxServer::from_headers(toolbox)
                .with_relay(relay)
                .with_server_info(info)
                .with_instructions(INSTRUCTIONS);
            let config = StreamableHttpServerConfig::default();
            let stop = config.cancellation_token.clone();
            let service = StreamableHttpService::new(
                move || Ok(server.clone()),
                Arc::new(LocalSessionManager::default()),
                config,
            );
            let listener = tokio::net::TcpListener::bind(addr).await?;
            println!("listening on http://{}/mcp", listener.local_addr()?);
            let router = axum::Router::new().nest_service("/mcp", service);
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    shutdown().await;
                    stop.cancel();
                })
                .await?;
        }
    }
    orders.close().await;
    Ok(())
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
