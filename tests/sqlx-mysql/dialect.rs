//! What the tests shared with sqlx-postgres (`tests/sqlx-shared/`) need to know about
//! MySQL / MariaDB: its pool type, its SQL, and the error the commit-fault proxy answers
//! with.

use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use txretry::Code;

/// The test binary, for naming tests in skip messages.
pub const DRIVER: &str = "sqlx-mysql";

pub type Pool = MySqlPool;
pub type PoolOptions = MySqlPoolOptions;

/// A short text column type.
pub const TEXT: &str = "VARCHAR(20)";
/// An integer key the server numbers.
pub const SERIAL_KEY: &str = "INT AUTO_INCREMENT PRIMARY KEY";
/// What follows a `CREATE TABLE`'s column list.
pub const TABLE_OPTIONS: &str = " ENGINE=InnoDB";

/// The session's id, as the server numbers its connections.
pub const SESSION_ID: &str = "SELECT CONNECTION_ID()";
pub type SessionId = u64;

/// `INSERT INTO {t} VALUES ({values})`, doing nothing when the key exists.
pub fn insert_once(t: &str, values: &str) -> String {
    format!("INSERT IGNORE INTO {t} VALUES ({values})")
}

/// CR_SERVER_LOST: "Lost connection to MySQL server during query".
const LOST: u16 = 2013;

/// The code the commit-fault proxy answers a COMMIT with: 2013, what a client library
/// reports when the link drops mid-query.
pub fn lost_commit_code() -> Option<Code> {
    Some(Code::MySql(LOST))
}

/// Asserts `err` is the proxy's answer to a COMMIT: the lost-connection error.
#[track_caller]
pub fn assert_lost_commit_error(err: &sqlx::Error) {
    assert_eq!(errno(err), Some(LOST), "{err:?}");
}

/// The MySQL error number of `err`: the server's, or that of the runner's own refusal of a
/// named lock (`LockNotGranted`: 1205 not granted in time, 1317 interrupted).
pub fn errno(err: &sqlx::Error) -> Option<u16> {
    let refused = err
        .as_database_error()
        .and_then(|db| db.try_downcast_ref::<txretry::sqlx::LockNotGranted>());
    refused
        .map(txretry::sqlx::LockNotGranted::number)
        .or_else(|| crate::common::errno(err))
}
