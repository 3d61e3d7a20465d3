//! Exactly-once tool calls: a tool call's outcome recorded in the same transaction as the
//! tool's writes, so that a call made twice (an agent loop resumed after a crash, an MCP
//! client re-sending after a dropped connection, a retry after an ambiguous COMMIT) has its
//! effect once and gets the first call's answer.
//!
//! The declaration ([`Once`]), the records' table and its SQL live here; the runner that
//! claims, runs and records (`ToolContext::once`) is in `sqlx/`, behind the `sqlx-*`
//! features.
//!
//! - `declaration.rs`: [`Once`], and each call's key; `table_name.rs`: [`InvalidTableName`];
//! - `dialect.rs`, `statements.rs`: the records' SQL for each database ([`Dialect`]);
//! - `business.rs`: [`BusinessError`], what a call records and replays;
//! - `refused.rs`: [`OnceRefused`]; `run.rs`: what one run of a handler did.

mod business;
mod declaration;
mod dialect;
mod refused;
mod run;
mod statements;
mod table_name;

#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]
mod sqlx;

pub use self::business::BusinessError;
pub use self::declaration::Once;
pub use self::dialect::Dialect;
pub use self::refused::OnceRefused;
pub(crate) use self::run::OnceRun;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]
pub use self::sqlx::{OnceBackend, OnceError};
pub(crate) use self::statements::Statements;
pub use self::table_name::InvalidTableName;
