//! The orders toolbox served to real agent clients, never a language model and never
//! hand-made JSON-RPC: rmcp's own client over a child process running the
//! `txretry-mcp-orders` binary (stdio) and over streamable HTTP on 127.0.0.1; rmcp over an
//! in-memory pipe for what needs to look inside the server (cancellation, list changes); and
//! rig's `ToolSet` calling the tools directly.
//!
//! The stdio and HTTP tests run on SQLite, Postgres (`TXRETRY_POSTGRES_URL`) and MariaDB
//! (`TXRETRY_MYSQL_URL`); without a server they are skipped with a note, unless
//! `TXRETRY_REQUIRE_DB=1` (then they fail).

// MCP logging is deprecated by SEP-2577 (2026-07-28); the retry warnings use it.
#![allow(deprecated)]

/// Each named `async fn(Db)` as three tests, `NAME::sqlite`, `NAME::postgres` and
/// `NAME::mariadb`, one per database.
#[macro_export]
macro_rules! on_each_database {
    ($($test:ident),+ $(,)?) => {$(
        mod $test {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$test($crate::common::Db::sqlite()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(db) = $crate::common::Db::postgres(module_path!()).await {
                    super::$test(db).await;
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mariadb() {
                if let Some(db) = $crate::common::Db::mariadb(module_path!()).await {
                    super::$test(db).await;
                }
            }
        }
    )+};
}

mod common;

mod cli;
mod http;
mod rig;
mod session;
mod stdio;
