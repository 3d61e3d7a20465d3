//! `ToolContext::once_rusqlite` on a rusqlite connection, blocking: the same claim, work
//! and record as the sqlx path (the decisions in `../record.rs`, the SQL in
//! `../statements.rs`), one transaction run by txretry-rusqlite's runner under the
//! invocation's policy, for [`Tool::blocking`](crate::Tool::blocking) handlers.
//!
//! - `context.rs`: `ToolContext::once_rusqlite`; `transaction.rs`: its one transaction,
//!   attempt by attempt, and the table's creation;
//! - `maintenance.rs`: `Once::migrate_rusqlite`, `Once::prune_rusqlite`.

mod context;
mod maintenance;
mod transaction;
