//! The orders toolbox behind the `txretry-mcp-orders` MCP server (and txretry-tool's
//! `orders` example, which shares the module): see [`orders`].
//!
//! The server itself is the binary: `txretry-mcp-orders --help`.

#[path = "../../txretry-tool/examples/shared/orders.rs"]
pub mod orders;
