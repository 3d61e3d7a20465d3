//! A [`ToolboxServer`](txretry_tool::mcp::ToolboxServer) and the rig tools driven by real
//! agent clients, never a language model and never hand-made JSON-RPC: rmcp's own client over
//! an in-memory pipe (what a host sees over stdio, and what needs to look inside the server:
//! cancellation, list changes, logging levels) and over streamable HTTP on 127.0.0.1 (the
//! callers of [`ToolboxServer::from_headers`](txretry_tool::mcp::ToolboxServer::from_headers));
//! and rig's `ToolSet` calling the tools directly.
//!
//! The tools are a small shop (`get_order`, `cancel_order`, `transfer`, see
//! `common/shop.rs`) on an SQLite file in a temp directory. The retries are real: another
//! connection holds SQLite's write lock, so the tools' transactions fail with SQLITE_BUSY
//! until it lets go.

// MCP logging is deprecated by SEP-2577 (2026-07-28); the retry warnings use it.
#![allow(deprecated)]

mod common;

mod call_ids;
mod http;
mod pipe;
mod rig;
mod session;
