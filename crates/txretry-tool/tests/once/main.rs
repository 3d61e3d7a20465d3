//! Exactly-once tool calls (`Tool::once`, `ToolContext::once*`) on real databases, one
//! matrix for every (driver, database) pair: SQLite always; PostgreSQL and MySQL/MariaDB
//! through txretry-testkit (TXRETRY_POSTGRES_URL, TXRETRY_MYSQL_URL; skipped without a
//! server unless TXRETRY_REQUIRE_DB=1).
//!
//! - `scenarios/`: every scenario, written once, generic over `driver.rs`'s `OnceDriver`,
//!   a file per group (duplicates, failures, records, crashes); `terminated.rs`: a backend
//!   terminated during COMMIT (Postgres pairs);
//! - `drivers/`: one `OnceDriver` per driver, each expanding the matrix for its databases:
//!   sqlx × {Postgres, MariaDB, SQLite}, tokio-postgres × Postgres (feature
//!   `tokio-postgres`), mysql_async × MariaDB (`mysql_async`), rusqlite × SQLite
//!   (`rusqlite`, blocking tools);
//! - `refused.rs`: what `once` refuses (on SQLite); `blocking.rs`: a blocking attempt that
//!   commits after its timeout.
//!
//! Needs the features `sqlx-postgres`, `sqlx-mysql` and `sqlx-sqlite`
//! (`cargo test -p txretry-tool --all-features`).
#![cfg(all(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]

mod blocking;
mod common;
mod driver;
mod drivers;
mod refused;
mod scenarios;
mod terminated;
