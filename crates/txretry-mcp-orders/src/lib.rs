//! The orders toolbox behind the `txretry-mcp-orders` MCP server (and txretry-tool's
//! `orders` example, which depends on this library), on SQLite, Postgres or MySQL/MariaDB:
//! see [`orders`].
//!
//! The server itself is the binary: `txretry-mcp-orders --help`.

pub mod orders;
