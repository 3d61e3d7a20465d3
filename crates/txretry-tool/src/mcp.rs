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

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, JsonObject, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ProgressToken, RequestId,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool as McpTool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use txretry_core::{Phase, RetryEvent, TransientKind};

use crate::{Caller, InvokeError, ToolDescriptor, Toolbox};

/// The request header with the caller's roles, comma-separated (`x-txretry-roles:
/// support, teller`); it may be repeated. Present but empty: a caller with no roles. Absent:
/// the caller is not resolved (offered nothing).
pub const ROLES_HEADER: &str = "x-txretry-roles";

/// The request header with the persona the caller speaks as (optional; at most once, not
/// empty).
pub const PERSONA_HEADER: &str = "x-txretry-persona";

/// The request header with the agent the caller runs as (optional; at most once, not empty).
pub const AGENT_HEADER: &str = "x-txretry-agent";

/// The logger name of the retry notifications (`notifications/message`).
pub const LOGGER: &str = "txretry";

/// Decides who is asking, for every `tools/list` and `tools/call` request.
///
/// Implemented for every `Fn(&RequestContext<RoleServer>) -> Option<Caller>`. `None` means the
/// caller cannot be resolved: the request is offered nothing and refused everything, with the
/// same error as an unknown tool.
///
/// The context carries the request's `_meta`, the peer (with the client's `initialize`
/// information) and, over streamable HTTP, the HTTP request ([`http_headers`]).
pub trait ResolveCaller: Send + Sync + 'static {
    /// The caller of this request, if it can be resolved.
    fn resolve(&self, request: &RequestContext<RoleServer>) -> Option<Caller>;
}

impl<F> ResolveCaller for F
where
    F: Fn(&RequestContext<RoleServer>) -> Option<Caller> + Send + Sync + 'static,
{
    fn resolve(&self, request: &RequestContext<RoleServer>) -> Option<Caller> {
        self(request)
    }
}

/// The HTTP headers of the request, when it came over rmcp's streamable HTTP server (which
/// puts the request's [`http::request::Parts`] into the context's extensions); `None` for
/// stdio and other transports.
pub fn http_headers(request: &RequestContext<RoleServer>) -> Option<&http::HeaderMap> {
    request
        .extensions
        .get::<http::request::Parts>()
        .map(|parts| &parts.headers)
}

/// The caller named by the headers [`ROLES_HEADER`] (required), [`PERSONA_HEADER`] and
/// [`AGENT_HEADER`] (optional). `None` (not resolved) when the roles header is absent, a value
/// is not valid UTF-8, or the persona or agent header is repeated or empty.
///
/// The headers are trusted as they are: put the server behind something that sets them
/// (a gateway that authenticated the client), or resolve callers with your own
/// [`ResolveCaller`] that checks a credential.
///
/// ```
/// use http::HeaderMap;
/// use txretry_tool::Caller;
/// use txretry_tool::mcp::caller_from_headers;
///
/// let mut headers = HeaderMap::new();
/// assert_eq!(caller_from_headers(&headers), None);
/// headers.insert("x-txretry-roles", "support, teller".parse().unwrap());
/// headers.insert("x-txretry-persona", "refunds".parse().unwrap());
/// assert_eq!(
///     caller_from_headers(&headers),
///     Some(Caller::new(["support", "teller"]).persona("refunds"))
/// );
/// ```
pub fn caller_from_headers(headers: &http::HeaderMap) -> Option<Caller> {
    let mut values = headers.get_all(ROLES_HEADER).iter().peekable();
    values.peek()?;
    let mut roles = Vec::new();
    for value in values {
        let value = value.to_str().ok()?;
        roles.extend(
            value
                .split(',')
                .map(str::trim)
                .filter(|role| !role.is_empty())
                .map(str::to_owned),
        );
    }
    let mut caller = Caller::new(roles);
    if let Some(persona) = single(headers, PERSONA_HEADER)? {
        caller = caller.persona(persona);
    }
    if let Some(agent) = single(headers, AGENT_HEADER)? {
        caller = caller.agent(agent);
    }
    Some(caller)
}

/// `Some(None)`: absent; `Some(Some(v))`: present once, not empty; `None`: unusable.
fn single<'h>(headers: &'h http::HeaderMap, name: &str) -> Option<Option<&'h str>> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Some(None);
    };
    if values.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?.trim();
    (!value.is_empty()).then_some(Some(value))
}

/// How a tool is listed to MCP clients: the descriptor's name, description and input schema,
/// and the annotations that follow from its declarations:
///
/// | declaration | annotation |
/// |---|---|
/// | [`read_only`](crate::Tool::read_only) | `readOnlyHint` (always set) |
/// | [`idempotent`](crate::Tool::idempotent) | `idempotentHint` (always set) |
/// | [`restart_safe(false)`](crate::Tool::restart_safe) on a tool that writes | `destructiveHint: true` |
///
/// A restart-safe tool that writes leaves `destructiveHint` unset (the spec's default, `true`:
/// a client should still confirm it); txretry claims nothing it does not know.
pub fn mcp_tool(descriptor: &ToolDescriptor) -> McpTool {
    let schema = match descriptor.input_schema() {
        Value::Object(schema) => schema.clone(),
        _ => {
            let mut schema = JsonObject::new();
            schema.insert("type".to_owned(), Value::from("object"));
            schema
        }
    };
    let mut annotations = ToolAnnotations::new()
        .read_only(descriptor.is_read_only())
        .idempotent(descriptor.is_idempotent());
    if !descriptor.is_read_only() && !descriptor.is_restart_safe() {
        annotations = annotations.destructive(true);
    }
    McpTool::new(
        descriptor.name().to_owned(),
        descriptor.description().to_owned(),
        Arc::new(schema),
    )
    .annotate(annotations)
}

/// What a `tools/call` of `tool` answers, from what [`Toolbox::invoke`] returned.
///
/// - `Ok(output)`: a string as one text block; an object as structured content (and its JSON
///   as text, for clients that read only text); anything else as its JSON text;
/// - [`InvokeError::Refused`] (unknown tool, or not offered): a protocol error, invalid params
///   (`-32602`), `tool "x" is not available`, the same for both;
/// - [`InvokeError::InvalidArguments`]: a protocol error, invalid params, saying what is wrong
///   and where;
/// - anything else (the handler ran: a business error, retries that ran out, an ambiguous
///   commit, a timeout, an output that could not be encoded): a result with `isError: true`
///   and the error's short text (kind and attempts; never the driver errors of transient
///   failures).
pub fn call_result(
    tool: &str,
    result: Result<Value, InvokeError>,
) -> Result<CallToolResult, ErrorData> {
    match result {
        Ok(Value::String(text)) => Ok(CallToolResult::success(vec![ContentBlock::text(text)])),
        Ok(output @ Value::Object(_)) => Ok(CallToolResult::structured(output)),
        Ok(output) => Ok(CallToolResult::success(vec![ContentBlock::text(
            output.to_string(),
        )])),
        Err(InvokeError::Refused { .. }) => Err(refused(tool)),
        Err(error @ InvokeError::InvalidArguments { .. }) => {
            Err(ErrorData::invalid_params(error.to_string(), None))
        }
        Err(error) => Ok(CallToolResult::error(vec![ContentBlock::text(
            error.to_string(),
        )])),
    }
}

/// The one protocol error for an unknown tool, a tool not offered and a caller not resolved.
fn refused(name: &str) -> ErrorData {
    let tool = match name.char_indices().nth(64) {
        Some((cut, _)) => format!("{}…", &name[..cut]),
        None => name.to_owned(),
    };
    ErrorData::invalid_params(InvokeError::Refused { tool }.to_string(), None)
}

/// Carries the toolbox's retry events to the MCP calls they belong to.
///
/// Install [`hook`](RetryRelay::hook) as the toolbox's `on_retry` (or call
/// [`forward`](RetryRelay::forward) from your own hook) and hand the relay to
/// [`ToolboxServer::with_relay`]. Every `tools/call` registers its call id here for as long as
/// it runs; an event is forwarded to the call whose id it carries, and dropped when no MCP
/// call has that id (a call made by other code). Cheap to clone; clones share the calls.
#[derive(Clone, Default)]
pub struct RetryRelay {
    calls: Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Notice>>>>,
}

impl RetryRelay {
    /// A relay with no calls registered.
    pub fn new() -> Self {
        RetryRelay::default()
    }

    /// Forwards a retry event to the MCP call whose call id it carries, if one is running.
    /// Never blocks (the event is queued for the call's request handler to send).
    pub fn forward(&self, event: &RetryEvent<'_>) {
        let Some(call_id) = event.call_id else {
            return;
        };
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = calls.get(call_id) {
            // The call may have just ended: then nobody is listening, which is fine.
            let _ = sender.send(Notice::new(event));
        }
    }

    /// A hook for `ToolboxBuilder::on_retry` that forwards every event.
    pub fn hook(&self) -> impl Fn(&RetryEvent<'_>) + Send + Sync + 'static {
        let relay = self.clone();
        move |event| relay.forward(event)
    }

    /// Registers `call_id` (made unique if it is taken) until the registration is dropped.
    fn register(&self, call_id: String) -> (Registration, mpsc::UnboundedReceiver<Notice>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let mut id = call_id;
        while calls.contains_key(&id) {
            id = format!("{id}#{}", NEXT.fetch_add(1, Ordering::Relaxed));
        }
        calls.insert(id.clone(), sender);
        let registration = Registration {
            relay: self.clone(),
            call_id: id,
        };
        (registration, receiver)
    }
}

impl fmt::Debug for RetryRelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("RetryRelay")
            .field("calls", &calls.len())
            .finish()
    }
}

/// A call's place in the relay; removed when the call ends or is dropped.
struct Registration {
    relay: RetryRelay,
    call_id: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut calls = self
            .relay
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        calls.remove(&self.call_id);
    }
}

/// Session numbers, and suffixes for call ids that are taken.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// A retry event, owned, with nothing of the error but its code: what a client is told.
#[derive(Debug)]
struct Notice {
    tool: String,
    call_id: String,
    attempt: u32,
    max_attempts: u32,
    delay: Duration,
    kind: &'static str,
    code: Option<String>,
    phase: Phase,
}

impl Notice {
    fn new(event: &RetryEvent<'_>) -> Notice {
        Notice {
            tool: event.tool.unwrap_or_default().to_owned(),
            call_id: event.call_id.unwrap_or_default().to_owned(),
            attempt: event.attempt,
            max_attempts: event.max_attempts,
            delay: event.delay,
            kind: event.kind().map_or("ambiguous", TransientKind::as_str),
            code: event.code.map(|code| code.to_string()),
            phase: event.phase,
        }
    }

    /// `cancel_order: attempt 1 of 5 failed (busy, SQLite code 5); retrying in 4ms`
    fn message(&self) -> String {
        let code = self
            .code
            .as_deref()
            .map(|code| format!(", {code}"))
            .unwrap_or_default();
        format!(
            "{}: attempt {} of {} failed ({}{code}); retrying in {:?}",
            self.tool, self.attempt, self.max_attempts, self.kind, self.delay
        )
    }

    fn data(&self) -> Value {
        json!({
            "message": self.message(),
            "event": "retry",
            "tool": self.tool,
            "call_id": self.call_id,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "kind": self.kind,
            "code": self.code,
            "phase": self.phase.to_string(),
            "delay_ms": u64::try_from(self.delay.as_millis()).unwrap_or(u64::MAX),
        })
    }
}

/// Sends one call's retry notices to its client.
struct Notifier {
    peer: Peer<RoleServer>,
    progress: Option<ProgressToken>,
    level: Arc<AtomicU8>,
    sent: u32,
}

impl Notifier {
    async fn send(&mut self, notice: Notice) {
        self.sent += 1;
        // A client that went away mid-call is not the call's problem: errors are ignored.
        if self.level.load(Ordering::Relaxed) <= rank(LoggingLevel::Warning) {
            let log = LoggingMessageNotificationParam::new(LoggingLevel::Warning, notice.data())
                .with_logger(LOGGER);
            let _ = self.peer.notify_logging_message(log).await;
        }
        if let Some(token) = &self.progress {
            let progress = ProgressNotificationParam::new(token.clone(), f64::from(self.sent))
                .with_message(notice.message());
            let _ = self.peer.notify_progress(progress).await;
        }
    }
}

/// Runs `call`, sending the notices that arrive meanwhile; the ones still queued when it
/// ends are sent before its result is returned.
async fn relaying<T>(
    call: impl Future<Output = T>,
    relay: Option<(Registration, mpsc::UnboundedReceiver<Notice>)>,
    mut notifier: Notifier,
) -> T {
    let Some((_registration, mut notices)) = relay else {
        return call.await;
    };
    let mut call = pin!(call);
    loop {
        tokio::select! {
            biased;
            result = &mut call => {
                while let Ok(notice) = notices.try_recv() {
                    notifier.send(notice).await;
                }
                return result;
            }
            Some(notice) = notices.recv() => notifier.send(notice).await,
        }
    }
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// What every session of a server shares: the current toolbox and the sessions to tell when
/// it changes.
struct Shared {
    toolbox: RwLock<Toolbox>,
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

/// A [`Toolbox`] as an rmcp [`ServerHandler`]: see the [module](self) documentation.
///
/// **Each clone is a session**: clones share the toolbox (and see
/// [`replace_toolbox`](ToolboxServer::replace_toolbox)), the resolver, the relay and the
/// server's identity, and each has its own logging level (`logging/setLevel`) and call-id
/// prefix. That is what rmcp's streamable HTTP service needs from its factory
/// (`move || Ok(server.clone())`).
pub struct ToolboxServer {
    shared: Arc<Shared>,
    resolver: Arc<dyn ResolveCaller>,
    relay: Option<RetryRelay>,
    info: Implementation,
    instructions: Option<String>,
    session: u64,
    level: Arc<AtomicU8>,
}

impl ToolboxServer {
    /// A server for `toolbox`, resolving each request's caller with `resolver`.
    ///
    /// The server identifies itself as `txretry-tool` with this crate's version until
    /// [`with_server_info`](ToolboxServer::with_server_info) says otherwise.
    pub fn new(toolbox: Toolbox, resolver: impl ResolveCaller) -> Self {
        ToolboxServer {
            shared: Arc::new(Shared {
                toolbox: RwLock::new(toolbox),
                peers: Mutex::new(Vec::new()),
            }),
            resolver: Arc::new(resolver),
            relay: None,
            info: Implementation::new("txretry-tool", env!("CARGO_PKG_VERSION")),
            instructions: None,
            session: NEXT.fetch_add(1, Ordering::Relaxed),
            level: Arc::new(AtomicU8::new(0)),
        }
    }

    /// A server whose every request has this caller (stdio: one client, known at start-up).
    /// `None`: nothing is offered.
    pub fn for_caller(toolbox: Toolbox, caller: Option<Caller>) -> Self {
        ToolboxServer::new(toolbox, move |_: &RequestContext<RoleServer>| {
            caller.clone()
        })
    }

    /// A server that reads each request's caller from its HTTP headers with
    /// [`caller_from_headers`] ([`ROLES_HEADER`], [`PERSONA_HEADER`], [`AGENT_HEADER`]).
    /// Requests that did not come over HTTP have no caller.
    pub fn from_headers(toolbox: Toolbox) -> Self {
        ToolboxServer::new(toolbox, |request: &RequestContext<RoleServer>| {
            http_headers(request).and_then(caller_from_headers)
        })
    }

    /// Reports the retries of every call to its client, from the events this relay receives
    /// (install [`RetryRelay::hook`] on the toolbox). Without a relay no retry is reported.
    #[must_use]
    pub fn with_relay(mut self, relay: RetryRelay) -> Self {
        self.relay = Some(relay);
        self
    }

    /// The name and version the server gives in `initialize`.
    #[must_use]
    pub fn with_server_info(mut self, info: Implementation) -> Self {
        self.info = info;
        self
    }

    /// Instructions for the model, given in `initialize`.
    #[must_use]
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// The toolbox the server serves now.
    pub fn toolbox(&self) -> Toolbox {
        self.shared
            .toolbox
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The caller of a request, as the server's resolver sees it.
    pub fn caller(&self, request: &RequestContext<RoleServer>) -> Option<Caller> {
        self.resolver.resolve(request)
    }

    /// Serves `toolbox` from now on, in every session, and sends
    /// `notifications/tools/list_changed` to every session that is still connected; returns
    /// how many were notified. Calls already running finish on the toolbox they started with.
    pub async fn replace_toolbox(&self, toolbox: Toolbox) -> usize {
        *self
            .shared
            .toolbox
            .write()
            .unwrap_or_else(PoisonError::into_inner) = toolbox;
        let peers = {
            let mut peers = self
                .shared
                .peers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            peers.retain(|peer| !peer.is_transport_closed());
            peers.clone()
        };
        let mut notified = 0;
        for peer in peers {
            if peer.notify_tool_list_changed().await.is_ok() {
                notified += 1;
            }
        }
        notified
    }

    fn call_id(&self, request: &RequestId) -> String {
        format!("mcp-{}-{request}", self.session)
    }
}

impl Clone for ToolboxServer {
    /// A new session: see the type's documentation.
    fn clone(&self) -> Self {
        ToolboxServer {
            shared: Arc::clone(&self.shared),
            resolver: Arc::clone(&self.resolver),
            relay: self.relay.clone(),
            info: self.info.clone(),
            instructions: self.instructions.clone(),
            session: NEXT.fetch_add(1, Ordering::Relaxed),
            level: Arc::new(AtomicU8::new(0)),
        }
    }
}

impl fmt::Debug for ToolboxServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolboxServer")
            .field("toolbox", &self.toolbox())
            .field("relay", &self.relay.is_some())
            .field("info", &self.info)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl ServerHandler for ToolboxServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let config = ServerConfig::new(capabilities).with_server_info(self.info.clone());
        match &self.instructions {
            Some(instructions) => config.with_instructions(instructions.clone()),
            None => config,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = match self.caller(&context) {
            Some(caller) => self
                .toolbox()
                .offered(&caller)
                .into_iter()
                .map(mcp_tool)
                .collect(),
            None => Vec::new(),
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name;
        let Some(caller) = self.caller(&context) else {
            return Err(refused(&name));
        };
        let toolbox = self.toolbox();
        let args = Value::Object(request.arguments.unwrap_or_default());
        let relay = self
            .relay
            .as_ref()
            .map(|relay| relay.register(self.call_id(&context.id)));
        let call_id = match &relay {
            Some((registration, _)) => registration.call_id.clone(),
            None => self.call_id(&context.id),
        };
        let notifier = Notifier {
            peer: context.peer.clone(),
            progress: context.meta.get_progress_token(),
            level: Arc::clone(&self.level),
            sent: 0,
        };
        let call = relaying(
            toolbox.invoke(&caller, &name, args, &call_id),
            relay,
            notifier,
        );
        let result = tokio::select! {
            biased;
            // rmcp cancels the request's token on `notifications/cancelled` (and when the
            // session ends); dropping `call` drops the invocation, which cancels the running
            // attempt. rmcp sends no response for a cancelled request.
            () = context.ct.cancelled() => {
                return Err(ErrorData::new(ErrorCode(-32800), "the call was cancelled", None));
            }
            result = call => result,
        };
        call_result(&name, result).map(CallToolResponse::from)
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.level.store(rank(request.level), Ordering::Relaxed);
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut peers = self
            .shared
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        peers.retain(|peer| !peer.is_transport_closed());
        peers.push(context.peer);
    }
}
