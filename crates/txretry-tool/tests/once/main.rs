//! Exactly-once tool calls (`Tool::once`, `ToolContext::once`) on real databases: SQLite
//! always; PostgreSQL and MySQL/MariaDB through txretry-testkit (TXRETRY_POSTGRES_URL,
//! TXRETRY_MYSQL_URL; skipped without a server unless TXRETRY_REQUIRE_DB=1).
//!
//! `suite.rs` holds the scenarios every database runs (a macro, so each runs on concrete
//! sqlx types); the database modules add what only they can show (a backend terminated
//! during COMMIT, the commit-fault proxy).
//!
//! `tokio_pg.rs` runs `ToolContext::once_tokio_postgres` (feature `tokio-postgres`) through
//! the same scenarios on tokio-postgres clients.
//!
//! Needs the features `sqlx-postgres`, `sqlx-mysql` and `sqlx-sqlite`
//! (`cargo test -p txretry-tool --all-features`).
#![cfg(all(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]

mod common;
#[macro_use]
mod suite;

mod mysql;
mod postgres;
mod refused;
mod sqlite;
#[cfg(feature = "tokio-postgres")]
mod tokio_pg;
