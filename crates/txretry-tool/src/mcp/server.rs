//! The [`ToolboxServer`]: a toolbox as an rmcp `ServerHandler`, one clone per session.

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorCode, Implementation, ListToolsResult,
    PaginatedRequestParams, RequestId, ServerCapabilities, ServerConfig, SetLevelRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::Value;

use super::NEXT;
use super::notice::{Notifier, rank, relaying};
use super::result::refused;
#[cfg(doc)]
use super::{AGENT_HEADER, PERSONA_HEADER, ROLES_HEADER};
use super::{
    ResolveCaller, RetryRelay, call_result, caller_from_headers, http_headers, mcp_tool,
    outcome_result, outcome_schema,
};
use crate::{Caller, Toolbox};

/// What every session of a server shares: the current toolbox and the sessions to tell when
/// it changes.
struct Shared {
    toolbox: RwLock<Toolbox>,
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

/// A [`Toolbox`] as an rmcp [`ServerHandler`]: see the [module](super) documentation.
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
    outcomes: bool,
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
            outcomes: false,
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

    /// Answers every call with its outcome as structured content (status, call id,
    /// attempts, the result or the error, and `replayed` when a `once` tool answered from
    /// an earlier call's record) and lists every tool with the
    /// outcome's output schema ([`outcome_schema`], around the tool's own
    /// [`output_schema`](crate::ToolDescriptor::output_schema)). Without it, a call answers
    /// its output as it is ([`call_result`]).
    #[must_use]
    pub fn with_outcomes(mut self) -> Self {
        self.outcomes = true;
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
        // The process's random part first: a `once` record keyed by the call id outlives
        // the process, and session and request numbers start again in the next one.
        format!(
            "mcp-{}-{}-{request}",
            crate::call_id::instance(),
            self.session
        )
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
            outcomes: self.outcomes,
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
                .map(|descriptor| {
                    let tool = mcp_tool(descriptor);
                    if !self.outcomes {
                        return tool;
                    }
                    match outcome_schema(descriptor.output_schema()) {
                        Value::Object(schema) => tool.with_raw_output_schema(Arc::new(schema)),
                        _ => tool,
                    }
                })
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
            toolbox.invoke_counted(&caller, &name, args, &call_id),
            relay,
            notifier,
        );
        let result = tokio::select! {
            biased;
            // rmcp cancels the request's token on `notifications/cancelled`, and when the
            // session ends: at once when it is cancelled, and when its input closes (stdin
            // at EOF) only after letting calls in flight finish and answer for up to 5 s (a
            // host may write its requests and close). Dropping `call` drops the invocation,
            // which cancels the running attempt. rmcp sends no response for a cancelled
            // request.
            () = context.ct.cancelled() => {
                return Err(ErrorData::new(ErrorCode(-32800), "the call was cancelled", None));
            }
            result = call => result,
        };
        if self.outcomes {
            return outcome_result(&name, &call_id, result).map(CallToolResponse::from);
        }
        call_result(&name, result.map(|answered| answered.output)).map(CallToolResponse::from)
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
