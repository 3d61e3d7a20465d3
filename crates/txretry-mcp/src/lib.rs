//! `txretry-mcp`: transactional database tools for any MCP host, declared in a YAML file.
//!
//! Each declared tool is a transaction of one or more statements on a source (SQLite,
//! Postgres, MySQL/MariaDB), with typed parameters bound (never written into the SQL),
//! captures, expectations that end a call with a business error, and an answer. A call runs
//! through txretry: deadlocks, serialization failures, lock-wait timeouts and `SQLITE_BUSY`
//! are retried in place under the tool's policy; a business error surfaces once; a COMMIT
//! whose reply was lost is reported `ambiguous`, never run again, unless the tool is
//! idempotent or `once` (exactly once per key, recorded in the same transaction).
//!
//! The binary is the product (see the crate's README for the file's format); the modules are
//! public for its tests and benches.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let config = txretry_mcp::config::load("tools.yaml", &|name| std::env::var(name).ok())?;
//! let pools = txretry_mcp::check::open(&config).await.map_err(|e| format!("{e:?}"))?;
//! txretry_mcp::check::prepare(&config, &pools).await.map_err(|e| format!("{e:?}"))?;
//! let relay = txretry_tool::mcp::RetryRelay::new();
//! let toolbox = txretry_mcp::toolbox::build(&config, &pools, &relay)?;
//! txretry_mcp::serve::stdio(toolbox, relay, txretry_tool::Caller::new(["support"])).await?;
//! # Ok(()) }
//! ```

pub mod auth;
pub mod check;
pub mod config;
pub mod engine;
pub mod serve;
pub mod source;
pub mod sql;
pub mod template;
pub mod toolbox;
