//! `ToolContext::once_mysql_async` on a mysql_async pool: the same claim, work and record
//! as the sqlx path (the decisions in `../record.rs`, the SQL in `../statements.rs`), one
//! transaction run by txretry-mysql-async's runner under the invocation's policy.
//!
//! - `context.rs`: `ToolContext::once_mysql_async`; `transaction.rs`: its one transaction,
//!   attempt by attempt, and the table's creation;
//! - `maintenance.rs`: `Once::migrate_mysql_async`, `Once::prune_mysql_async`.

mod context;
mod maintenance;
mod transaction;
