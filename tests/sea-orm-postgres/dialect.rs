//! What the tests shared with sea-orm-mysql (`tests/sea-orm-shared/`) need to know about
//! PostgreSQL: its server, its SQL, and the codes its errors carry.

use sea_orm::DbErr;
use txretry::{Code, SqlState};

/// The test binary, for naming tests in skip messages.
pub const DRIVER: &str = "sea-orm-postgres";

/// The server's URL, or `None` when the test must skip.
pub fn server_url(test: &str) -> Option<String> {
    txretry_testkit::postgres_url(test)
}

/// A short text column type.
pub const TEXT: &str = "text";
/// What follows a `CREATE TABLE`'s column list.
pub const TABLE_OPTIONS: &str = "";

/// The session's id, as the server numbers its connections.
pub const SESSION_ID: &str = "SELECT pg_backend_pid()";
pub type SessionId = i32;

/// `INSERT INTO {t} VALUES ({values})`, doing nothing when the key exists.
pub fn insert_once(t: &str, values: &str) -> String {
    format!("INSERT INTO {t} VALUES ({values}) ON CONFLICT (id) DO NOTHING")
}

pub fn sqlstate(code: &str) -> Option<Code> {
    Some(Code::SqlState(SqlState::new(code).unwrap()))
}

/// unique_violation.
pub fn unique_violation_code() -> Option<Code> {
    sqlstate("23505")
}

/// The code the commit-fault proxy answers a COMMIT with: 08P01, as PgBouncer does when its
/// server link breaks.
pub fn lost_commit_code() -> Option<Code> {
    sqlstate("08P01")
}

/// The SQLSTATE of the Postgres error inside a `DbErr`, read from sqlx's error itself.
pub fn code_of(err: &DbErr) -> Option<String> {
    let sqlx = txretry::sea_orm::sqlx_error(err)?;
    Some(sqlx.as_database_error()?.code()?.into_owned())
}

/// Asserts `err` is the proxy's answer to a COMMIT: the pooler's own error, unchanged
/// inside SeaORM's.
#[track_caller]
pub fn assert_lost_commit_error(err: &DbErr) {
    assert_eq!(code_of(err).as_deref(), Some("08P01"), "{err:?}");
}

/// A MySQL error number: none on PostgreSQL.
pub fn errno(_: &DbErr) -> Option<u16> {
    None
}
