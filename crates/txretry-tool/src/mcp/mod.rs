//! A [`Toolbox`] as an MCP server (feature `mcp`), on [rmcp](https://docs.rs/rmcp) 3.x, the
//! official Rust SDK of the Model Context Protocol.
//!
//! [`ToolboxServer`] is an rmcp [`ServerHandler`]: serve it over any rmcp transport (stdio,
//! streamable HTTP, …) and an MCP host (Claude Desktop, an IDE, an agent framework) can list
//! and call the toolbox's tools.
//!
//! - **`tools/list`** returns exactly [`Toolbox::offered`] for the request's caller: name,
//!   description, input JSON Schema, and the annotations that follow from the declarations
//!   (see [`mcp_tool`]).
//! - **`tools/call`** goes through [`Toolbox::invoke`] (the gate, the argument check, one retry
//!   budget). Following the MCP spec's split (see [`call_result`]): the tool's output, or a
//!   business error / retries that ran out / an ambiguous commit as a result with
//!   `isError: true` and the [`InvokeError`]'s short text; an unknown tool, a tool not offered
//!   to the caller (the *same* error, so a caller cannot probe what exists) and invalid
//!   arguments as protocol errors (`-32602`, invalid params), the handler never run.
//! - **The caller** of every request comes from a [`ResolveCaller`] you supply: fixed at
//!   start-up for stdio ([`ToolboxServer::for_caller`]), from the request's HTTP headers for
//!   streamable HTTP ([`ToolboxServer::from_headers`], [`ROLES_HEADER`], [`PERSONA_HEADER`],
//!   [`AGENT_HEADER`]), or anything else. A request whose caller cannot be resolved is offered
//!   nothing and refused everything.
//! - **Retries are reported** while the call runs, as `notifications/message` (level
//!   `warning`, logger `txretry`) and, when the request carries a progress token, as
//!   `notifications/progress`. The events come from the toolbox's `on_retry` hook through a
//!   [`RetryRelay`]: install [`RetryRelay::hook`] (or call [`RetryRelay::forward`] from your
//!   own hook) when you build the toolbox, and hand the relay to
//!   [`ToolboxServer::with_relay`]. Each call gets its own call id, so concurrent calls each
//!   hear only their own retries.
//! - **Cancellation**: a `notifications/cancelled` for an in-flight call drops the invocation
//!   (rmcp only cancels the request's token; the server drops the call's future on it), which
//!   cancels the running attempt and rolls back its open transaction; no response is sent.
//! - **`notifications/tools/list_changed`**: [`ToolboxServer::replace_toolbox`] swaps the
//!   toolbox for every session and notifies them.
//!
//! ```no_run
//! use rmcp::ServiceExt;
//! use txretry_tool::mcp::{RetryRelay, ToolboxServer};
//! use txretry_tool::{Caller, Toolbox};
//!
//! # async fn demo(tools: Vec<txretry_tool::Tool>) -> Result<(), Box<dyn std::error::Error>> {
//! let relay = RetryRelay::new();
//! let mut builder = Toolbox::builder().on_retry(relay.hook());
//! for tool in tools {
//!     builder = builder.tool(tool);
//! }
//! let toolbox = builder.build()?;
//!
//! // stdio: one session, the caller fixed at start-up (e.g. from flags). With rmcp's
//! // `transport-io` feature: `rmcp::transport::stdio()`.
//! let server = ToolboxServer::for_caller(toolbox, Some(Caller::new(["support"]))).with_relay(relay);
//! # let transport = tokio::io::duplex(64).0;
//! server.serve(transport).await?.waiting().await?;
//! # Ok(()) }
//! ```
//!
//! Over streamable HTTP (rmcp's `transport-streamable-http-server` feature), every session is
//! a clone of the server; the callers come from the headers:
//!
//! ```ignore
//! let server = ToolboxServer::from_headers(toolbox).with_relay(relay);
//! let service = StreamableHttpService::new(
//!     move || Ok(server.clone()),
//!     Arc::new(LocalSessionManager::default()),
//!     StreamableHttpServerConfig::default(),
//! );
//! axum::serve(listener, axum::Router::new().nest_service("/mcp", service)).await?;
//! ```

// MCP logging (`notifications/message`, `logging/setLevel`) is deprecated by SEP-2577 in the
// 2026-07-28 revision, and rmcp marks its types deprecated. Hosts on the earlier revisions
// (every `initialize`-based session) still use it, and it is how a retry reaches them.
#![allow(deprecated)]

// - `caller.rs`: who is asking ([`ResolveCaller`], the headers);
// - `tool.rs`: how a tool is listed ([`mcp_tool`]); `result.rs`: what a call answers;
// - `outcome.rs`: what a call answers as structured content ([`outcome_result`]);
// - `relay.rs`: the retry events, to the calls they belong to ([`RetryRelay`]);
// - `notice.rs`: a retry, as a client is told it;
// - `server.rs`: the [`ToolboxServer`] and its `ServerHandler`.

mod caller;
mod notice;
mod outcome;
mod relay;
mod result;
mod server;
mod tool;

use std::sync::atomic::AtomicU64;

#[cfg(doc)]
use rmcp::ServerHandler;

#[cfg(doc)]
use crate::{InvokeError, Toolbox};

pub use self::caller::{
    AGENT_HEADER, PERSONA_HEADER, ROLES_HEADER, ResolveCaller, caller_from_headers, http_headers,
};
pub use self::notice::LOGGER;
pub(crate) use self::outcome::outcome_result;
pub use self::outcome::outcome_schema;
pub use self::relay::RetryRelay;
pub use self::result::call_result;
pub use self::server::ToolboxServer;
pub use self::tool::mcp_tool;

/// Session numbers, and suffixes for call ids that are taken.
static NEXT: AtomicU64 = AtomicU64::new(1);
