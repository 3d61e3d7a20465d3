//! What the shared helpers (`db`) need to know of this binary's server, and what only
//! MySQL/MariaDB has: connection ids,
//! what diesel-async keeps of an error. Blocking (on the binary's runtime), so that the
//! shared scenarios and the async tests alike call them.

use diesel_async::{AsyncMysqlConnection, RunQueryDsl};

use diesel::result::DatabaseErrorKind;
use txretry::{Classification, Code, TransientKind, Verdict};

use crate::calls::block_on;
use crate::db::{Number, exec};

/// The SQL dialect of the shared transfers (`tests/shared/transfers.rs`).
pub const DIALECT: crate::transfers::Dialect = crate::transfers::Dialect::MySql;

/// This binary's connection type.
pub type Conn = AsyncMysqlConnection;

/// This binary's name, for test names and table prefixes.
pub const BINARY: &str = "diesel_async_mysql";

/// The SQLSTATE of a duplicate key on this server.
pub const UNIQUE_VIOLATION: &str = "23000";

/// What follows a `CREATE TABLE`'s column list.
pub const TABLE_OPTIONS: &str = " ENGINE=InnoDB";

/// The server URL, or `None` when the test must skip (txretry-testkit printed why; with
/// `TXRETRY_REQUIRE_DB=1` it panics instead).
pub fn url(test: &str) -> Option<String> {
    txretry_testkit::mysql_url(test)
}

/// `CREATE TABLE {name} (note varchar(64) NOT NULL) ENGINE=InnoDB`: no key, so a second
/// run would show as a second row rather than as a duplicate-key error.
pub fn create_log(conn: &mut Conn, name: &str) {
    block_on(exec(
        conn,
        &format!("CREATE TABLE {name} (note varchar(64) NOT NULL){TABLE_OPTIONS}"),
    ));
}

/// The session's connection id (what `information_schema.processlist` names).
pub fn connection_id(conn: &mut Conn) -> i64 {
    block_on(
        diesel::sql_query("SELECT CAST(CONNECTION_ID() AS SIGNED) AS n").get_result::<Number>(conn),
    )
    .expect("CONNECTION_ID()")
    .n
}

/// The session `connection_lost` ends: its connection id.
pub struct Victim(i64);

/// The session `conn` is, for [`end_session`].
pub fn victim(conn: &mut Conn) -> Victim {
    Victim(connection_id(conn))
}

/// Ends `victim`'s session from `observer`: `KILL CONNECTION`.
pub async fn end_session(observer: &mut Conn, victim: &Victim) {
    exec(observer, &format!("KILL CONNECTION {}", victim.0)).await;
}

/// Asserts that `err`, classified as `classification`, is what a statement gets on a
/// killed connection: mysql_async's I/O error, which diesel-async keeps only as text (no
/// SQLSTATE), read back by the adapter as a driver code.
#[track_caller]
pub fn assert_connection_lost(err: &diesel::result::Error, classification: &Classification) {
    assert!(
        matches!(
            err,
            diesel::result::Error::DatabaseError(DatabaseErrorKind::Unknown, info)
                if info.sqlstate().is_none()
        ),
        "no server code: {err:?}"
    );
    assert_eq!(
        classification.verdict,
        Verdict::Transient(TransientKind::Connection)
    );
    assert!(
        matches!(classification.code, Some(Code::Driver(_))),
        "{err:?}"
    );
}

/// The SQLSTATE and message diesel-async kept of a database error.
pub fn kept(err: &diesel::result::Error) -> Option<(String, String)> {
    match err {
        diesel::result::Error::DatabaseError(_, info) => Some((
            info.sqlstate()
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
            info.message().to_owned(),
        )),
        _ => None,
    }
}
