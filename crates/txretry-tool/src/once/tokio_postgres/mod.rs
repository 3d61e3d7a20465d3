//! `ToolContext::once_tokio_postgres` on a tokio-postgres client: the same claim, work and
//! record as the sqlx path (the decisions in `../record.rs`, the SQL in `../statements.rs`),
//! one transaction run by txretry-tokio-postgres's runner under the invocation's policy.
//!
//! - `context.rs`: `ToolContext::once_tokio_postgres`; `transaction.rs`: its one
//!   transaction, attempt by attempt, and the table's creation;
//! - `maintenance.rs`: `Once::migrate_tokio_postgres`, `Once::prune_tokio_postgres`.

mod context;
mod maintenance;
mod transaction;
