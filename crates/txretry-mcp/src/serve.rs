//! `txretry-mcp serve`: the toolbox as an MCP server over stdio (one client, the caller set
//! by flags) or streamable HTTP (each request's caller from its bearer token).

use std::net::IpAddr;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::model::Implementation;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use txretry_tool::mcp::{RetryRelay, ToolboxServer, http_headers};
use txretry_tool::{Caller, Toolbox};

use crate::auth::Tokens;

/// What the server tells hosts in `initialize`.
const INSTRUCTIONS: &str = "Each tool runs one database transaction. A deadlock or a serialization failure is retried inside the call; you see it only in `attempts`. `status` says what happened: committed (done, once), business_error (nothing was written; the message says why, and the same call fails the same way), ambiguous (the commit may or may not have happened: for a tool marked idempotent, or one keyed exactly once, calling again with the same arguments is safe), failed (nothing was written: a temporary failure, try again later).";

/// The server's identity.
fn info() -> Implementation {
    Implementation::new("txretry-mcp", env!("CARGO_PKG_VERSION"))
}

/// Serves `toolbox` over stdio to one client whose caller is `caller`, until it leaves.
///
/// # Errors
/// The transport's.
pub async fn stdio(
    toolbox: Toolbox,
    relay: RetryRelay,
    caller: Caller,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server = ToolboxServer::for_caller(toolbox, Some(caller))
        .with_relay(relay)
        .with_outcomes()
        .with_server_info(info())
        .with_instructions(INSTRUCTIONS);
    tokio::select! {
        served = async { server.serve(rmcp::transport::stdio()).await?.waiting().await.map(drop).map_err(Into::into) } => served,
        () = shutdown() => Ok(()),
    }
}

/// Serves `toolbox` over streamable HTTP at `http://ADDR/mcp` on `listener` until a signal
/// comes. The caller binds it, and so can say which address and flag a failure is about.
///
/// # Errors
/// The server's.
pub async fn http(
    toolbox: Toolbox,
    relay: RetryRelay,
    tokens: Tokens,
    listener: TcpListener,
    hosts: Hosts,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server = ToolboxServer::new(toolbox, move |request: &_| {
        http_headers(request).and_then(|headers| tokens.caller(headers))
    })
    .with_relay(relay)
    .with_outcomes()
    .with_server_info(info())
    .with_instructions(INSTRUCTIONS);
    let mut config = StreamableHttpServerConfig::default();
    match hosts {
        Hosts::Any => config = config.disable_allowed_hosts(),
        // rmcp's own list is loopback's names.
        Hosts::AlsoNamed(names) => config.allowed_hosts.extend(names),
    }
    let stop = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown().await;
            stop.cancel();
        })
        .await?;
    Ok(())
}

/// The `Host` headers the HTTP server answers; rmcp refuses the others, so that a web page
/// cannot reach a server on loopback through a DNS name of its own (DNS rebinding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hosts {
    /// Loopback's names (rmcp's default), and these names and addresses (any port).
    AlsoNamed(Vec<String>),
    /// Any: the server listens on every interface, and cannot know the names it is
    /// reached by. Every request still needs one of the config's bearer tokens.
    Any,
}

impl Hosts {
    /// For a server bound to `ip`: loopback's names, `ip` itself and every `named` one;
    /// bound to every interface (`0.0.0.0`, `[::]`) with nothing named, any.
    pub fn answered(ip: IpAddr, named: &[String]) -> Hosts {
        if ip.is_unspecified() && named.is_empty() {
            return Hosts::Any;
        }
        let bound = (!ip.is_unspecified()).then(|| ip.to_string());
        Hosts::AlsoNamed(bound.into_iter().chain(named.iter().cloned()).collect())
    }
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
