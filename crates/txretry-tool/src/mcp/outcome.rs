//! A call's outcome as structured content: what happened (committed, business error,
//! ambiguous, failed), how many attempts it took, the call id, the result or the error, and
//! whether it was replayed from a `once` record.

use rmcp::ErrorData;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::result::refused;
use crate::invoke::Answered;
use crate::{FailureKind, InvokeError};

/// What a call ended as, the `status` of its outcome.
fn status(error: &InvokeError) -> &'static str {
    match error {
        InvokeError::Failed(failure) => match failure.kind() {
            FailureKind::Business => "business_error",
            kind if kind.may_have_taken_effect() => "ambiguous",
            _ => "failed",
        },
        // The handler ran to the end: its work may have committed.
        InvokeError::InvalidOutput { .. } => "ambiguous",
        _ => "failed",
    }
}

/// The JSON Schema of an outcome (MCP's `outputSchema` of a server
/// [`with_outcomes`](super::ToolboxServer::with_outcomes)): `result` is described by the
/// tool's own output schema when it declares one.
///
/// ```
/// use serde_json::json;
/// let schema = txretry_tool::mcp::outcome_schema(Some(&json!({"type": "array"})));
/// assert_eq!(schema["properties"]["result"]["type"], "array");
/// assert_eq!(schema["required"], json!(["status", "call_id", "attempts"]));
/// ```
pub fn outcome_schema(result: Option<&Value>) -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": {
                "type": "string",
                "enum": ["committed", "business_error", "ambiguous", "failed"],
                "description": "committed: the transaction committed and `result` is its answer; business_error: a real outcome, the same call would fail the same way (nothing was written); ambiguous: the commit may or may not have happened; failed: nothing was written (retries ran out, or a temporary failure that was not retried: try again later)",
            },
            "call_id": {"type": "string", "description": "the server's id of this call"},
            "attempts": {"type": "integer", "minimum": 0, "description": "attempts in all, retries included"},
            "failure": {"type": "string", "description": "why the call did not commit, when it did not"},
            "replayed": {"type": "boolean", "description": "true when a `once` tool's key had been recorded by an earlier call: this is that call's outcome, read from its record, and nothing ran now (a business error stays that call's: to try again, use another key)"},
            "result": result.cloned().unwrap_or_else(|| json!({})),
            "error": {"type": "string", "description": "what went wrong, when the call did not commit"},
        },
        "required": ["status", "call_id", "attempts"],
    })
}

/// A `tools/call` answer as an outcome: a result whose `structuredContent` is the outcome
/// (see [`outcome_schema`]), repeated as JSON text for clients that read only text (as the
/// MCP spec asks), `isError: true` unless it committed. An unknown or unoffered tool and
/// invalid arguments are protocol errors, as with [`call_result`](super::call_result):
/// nothing ran.
pub(crate) fn outcome_result(
    tool: &str,
    call_id: &str,
    result: Result<Answered, InvokeError>,
) -> Result<CallToolResult, ErrorData> {
    match result {
        Ok(answered) => {
            let mut outcome = json!({
                "status": "committed",
                "call_id": call_id,
                "attempts": answered.attempts,
                "result": answered.output,
            });
            if answered.replayed {
                outcome["replayed"] = Value::Bool(true);
            }
            Ok(CallToolResult::structured(outcome))
        }
        Err(InvokeError::Refused { .. }) => Err(refused(tool)),
        Err(error @ InvokeError::InvalidArguments { .. }) => {
            Err(ErrorData::invalid_params(error.to_string(), None))
        }
        Err(error) => {
            let failure = error.failure();
            // Every attempt across layers (the runners' included), as the message counts.
            let attempts = failure.map_or(0, |failure| failure.outcome().attempts());
            let mut outcome = json!({
                "status": status(&error),
                "call_id": call_id,
                "attempts": attempts,
                "error": error.to_string(),
            });
            if let Some(failure) = failure {
                outcome["failure"] = Value::from(failure.kind().as_str());
                if failure.replayed() {
                    outcome["replayed"] = Value::Bool(true);
                }
            }
            Ok(CallToolResult::structured_error(outcome))
        }
    }
}
