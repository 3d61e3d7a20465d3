//! The client side: [`Recorder`], an MCP client that records the notifications it
//! receives, and the calls the tests make through it (tools, their results and errors).

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorCode, JsonObject, LoggingMessageNotificationParam,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::Value;
use tokio::sync::watch;

use super::within;

pub type Client = RunningService<RoleClient, Recorder>;

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
