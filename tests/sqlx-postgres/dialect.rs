//! What the tests shared with sqlx-mysql (`tests/sqlx-shared/`) need to know about
//! PostgreSQL: its pool type, its SQL, and the error the commit-fault proxy answers with.

use sqlx::postgres::{PgPool, PgPoolOptions};
use txretry::Code;

use crate::common::{code_of, sqlstate};

/// The test binary, for naming tests in skip messages.
pub const DRIVER: &str = "sqlx-postgres";

pub type Pool = PgPool;
pub type PoolOptions = PgPoolOptions;

/// A short text column type.
pub const TEXT: &str = "text";
/// An integer key the server numbers.
pub const SERIAL_KEY: &str = "serial PRIMARY KEY";
/// What follows a `CREATE TABLE`'s column list.
pub const TABLE_OPTIONS: &str = "";

/// The session's id, as the server numbers its connections.
pub const SESSION_ID: &str = "SELECT pg_backend_pid()";
pub type SessionId = i32;

/// `INSERT INTO {t} VALUES ({values})`, doing nothing when the key exists.
pub fn insert_once(t: &str, values: &str) -> String {
    format!("INSERT INTO {t} VALUES ({values}) ON CONFLICT (id) DO NOTHING")
}

/// The code the commit-fault proxy answers a COMMIT with: 08P01, as PgBouncer does when its
/// server link breaks.
pub fn lost_commit_code() -> Option<Code> {
    sqlstate("08P01")
}

/// Asserts `err` is the proxy's answer to a COMMIT: the pooler's own error, unchanged.
#[track_caller]
pub fn assert_lost_commit_error(err: &sqlx::Error) {
    assert_eq!(code_of(err).as_deref(), Some("08P01"), "{err:?}");
    let db = err.as_database_error().expect("the proxy's ErrorResponse");
    assert_eq!(db.message(), "server conn crashed?");
}

/// A MySQL error number: none on PostgreSQL.
pub fn errno(_: &sqlx::Error) -> Option<u16> {
    None
}
