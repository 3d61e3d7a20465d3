//! Exactly-once tool calls: a tool call's outcome recorded in the same transaction as the
//! tool's writes, so that a call made twice (an agent loop resumed after a crash, an MCP
//! client re-sending after a dropped connection, a retry after an ambiguous COMMIT) has its
//! effect once and gets the first call's answer.
//!
//! The declaration ([`Once`]), the records' table and its SQL, and what every driver
//! decides the same way live here; the runners that claim, run and record are per driver:
//! `ToolContext::once` in `sqlx/` (the `sqlx-*` features), `ToolContext::once_tokio_postgres`
//! in `tokio_postgres/` (the `tokio-postgres` feature), `ToolContext::once_mysql_async` in
//! `mysql_async/` (the `mysql_async` feature) and the blocking `ToolContext::once_rusqlite`
//! in `rusqlite/` (the `rusqlite` feature).
//!
//! - `declaration.rs`: [`Once`], and each call's key; `table_name.rs`: [`InvalidTableName`];
//! - `dialect.rs`, `statements.rs`: the records' SQL for each database ([`Dialect`]);
//! - `business.rs`: [`BusinessError`], what a call records and replays;
//! - `record.rs`: the drivers' shared decisions (replay or run, the recorded output, which
//!   errors are business errors, `prune`'s age binds), and how a call begins, loops until
//!   its table exists, and ends; `error.rs`: `OnceError`;
//! - `refused.rs`: [`OnceRefused`]; `run.rs`: what one run of a handler did.

mod business;
mod declaration;
mod dialect;
#[cfg(once_records)]
mod error;
#[cfg(feature = "mysql_async")]
mod mysql_async;
#[cfg(once_records)]
mod record;
mod refused;
mod run;
#[cfg(feature = "rusqlite")]
mod rusqlite;
mod statements;
mod table_name;
#[cfg(feature = "tokio-postgres")]
mod tokio_postgres;

#[cfg(sqlx_once)]
mod sqlx;

pub use self::business::BusinessError;
pub use self::declaration::Once;
pub use self::dialect::Dialect;
#[cfg(once_records)]
pub use self::error::OnceError;
pub use self::refused::OnceRefused;
pub(crate) use self::run::OnceRun;
#[cfg(sqlx_once)]
pub use self::sqlx::OnceBackend;
pub(crate) use self::statements::Statements;
pub use self::table_name::InvalidTableName;
