//! What a `tools/call` answers: a result (`isError` or not), or a protocol error.

use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::InvokeError;
#[cfg(doc)]
use crate::Toolbox;

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
pub(super) fn refused(name: &str) -> ErrorData {
    ErrorData::invalid_params(InvokeError::refused(name).to_string(), None)
}
