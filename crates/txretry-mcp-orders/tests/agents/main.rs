//! The orders toolbox served to real agent clients, never a language model and never
//! hand-made JSON-RPC: rmcp's own client over a child process running the
//! `txretry-mcp-orders` binary (stdio) and over streamable HTTP on 127.0.0.1; rmcp over an
//! in-memory pipe for what needs to look inside the server (cancellation, list changes); and
//! rig's `ToolSet` calling the tools directly.

// MCP logging is deprecated by SEP-2577 (2026-07-28); the retry warnings use it.
#![allow(deprecated)]

mod common;

mod http;
mod rig;
mod session;
mod stdio;
