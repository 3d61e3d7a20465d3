//! What the tests shared with sqlx-postgres and sqlx-mysql (`tests/sqlx-shared/business.rs`)
//! need to know about SQLite: its pool type and its SQL.

use sqlx::sqlite::SqlitePool;

/// The test binary, for naming tests in skip messages.
pub const DRIVER: &str = "sqlx-sqlite";

pub type Pool = SqlitePool;

/// A short text column type.
pub const TEXT: &str = "TEXT";
/// An integer key the database numbers.
pub const SERIAL_KEY: &str = "INTEGER PRIMARY KEY";
/// What follows a `CREATE TABLE`'s column list.
pub const TABLE_OPTIONS: &str = "";
