//! The orders toolbox behind the `txretry-mcp-orders` MCP server (and txretry-tool's
//! `orders` example, which shares the module), on SQLite, Postgres or MySQL/MariaDB: see
//! [`orders`].
//!
//! The server itself is the binary: `txretry-mcp-orders --help`.

#[path = "../../txretry-tool/examples/shared/orders/mod.rs"]
pub mod orders;
