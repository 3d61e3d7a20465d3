//! How a tool is listed to MCP clients.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool as McpTool, ToolAnnotations};
use serde_json::Value;

use crate::ToolDescriptor;

/// How a tool is listed to MCP clients: the descriptor's name, description and input schema,
/// and the annotations that follow from its declarations:
///
/// | declaration | annotation |
/// |---|---|
/// | [`read_only`](crate::Tool::read_only) | `readOnlyHint` (always set) |
/// | [`idempotent`](crate::Tool::idempotent) | `idempotentHint: true` (absent unless declared) |
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
    let mut annotations = ToolAnnotations::new().read_only(descriptor.is_read_only());
    // Only a declaration makes a tool idempotent: absent otherwise, never guessed.
    if descriptor.is_idempotent() {
        annotations = annotations.idempotent(true);
    }
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
