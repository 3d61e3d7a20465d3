//! `txretry-mcp serve`: the toolbox as an MCP server over stdio (one client, the caller set
//! by flags) or streamable HTTP (each request's caller from its bearer token).

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
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server = ToolboxServer::new(toolbox, move |request: &_| {
        http_headers(request).and_then(|headers| tokens.caller(headers))
    })
    .with_relay(relay)
    .with_outcomes()
    .with_server_info(info())
    .with_instructions(INSTRUCTIONS);
    let config = StreamableHttpServerConfig::default();
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
