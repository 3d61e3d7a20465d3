//! What the tests shared with sea-orm-postgres (`tests/sea-orm-shared/`) need to know
//! about MySQL / MariaDB: its server, its SQL, and the codes its errors carry.

use sea_orm::DbErr;
use sea_orm::sqlx::mysql::MySqlDatabaseError;
use txretry::Code;

/// The test binary, for naming tests in skip messages.
pub const DRIVER: &str = "sea-orm-mysql";

/// The server's URL, or `None` when the test must skip.
pub fn server_url(test: &str) -> Option<String> {
    txretry_testkit::mysql_url(test)
}

/// A short text column type.
pub const TEXT: &str = "VARCHAR(20)";
/// What follows a `CREATE TABLE`'s column list.
pub const TABLE_OPTIONS: &str = " ENGINE=InnoDB";

/// The session's id, as the server numbers its connections.
pub const SESSION_ID: &str = "SELECT CONNECTION_ID()";
pub type SessionId = u64;

/// `INSERT INTO {t} VALUES ({values})`, doing nothing when the key exists.
pub fn insert_once(t: &str, values: &str) -> String {
    format!("INSERT IGNORE INTO {t} VALUES ({values})")
}

/// ER_DUP_ENTRY.
pub fn unique_violation_code() -> Option<Code> {
    Some(Code::MySql(1062))
}

/// CR_SERVER_LOST: "Lost connection to MySQL server during query".
const LOST: u16 = 2013;

/// The code the commit-fault proxy answers a COMMIT with: 2013, what a client library
/// reports when the link drops mid-query.
pub fn lost_commit_code() -> Option<Code> {
    Some(Code::MySql(LOST))
}

/// The MySQL errno of the server error inside a `DbErr`, read from sqlx's error itself.
pub fn errno(err: &DbErr) -> Option<u16> {
    let sqlx = txretry::sea_orm::sqlx_error(err)?;
    let db = sqlx.as_database_error()?;
    Some(db.try_downcast_ref::<MySqlDatabaseError>()?.number())
}

/// Asserts `err` is the proxy's answer to a COMMIT: the lost-connection error, unchanged
/// inside SeaORM's.
#[track_caller]
pub fn assert_lost_commit_error(err: &DbErr) {
    assert_eq!(errno(err), Some(LOST), "{err:?}");
}
