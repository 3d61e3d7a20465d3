//! `ToolContext::once` on sqlx pools: claim the key, run the handler's work, record the
//! outcome — one transaction, run by txretry-sqlx's runner under the invocation's policy.
//!
//! - `backend.rs`: [`OnceBackend`], the databases it runs on (`postgres.rs`, `mysql.rs`,
//!   `sqlite.rs`);
//! - `context.rs`: `ToolContext::once`; `transaction.rs`: its one transaction, attempt by
//!   attempt;
//! - `maintenance.rs`: `Once::migrate`, `Once::prune`.

mod backend;
mod context;
mod maintenance;
#[cfg(feature = "sqlx-mysql")]
mod mysql;
#[cfg(feature = "sqlx-postgres")]
mod postgres;
#[cfg(feature = "sqlx-sqlite")]
mod sqlite;
mod transaction;

pub use self::backend::OnceBackend;
