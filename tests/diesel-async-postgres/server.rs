//! What the shared helpers (`db`) need to know of this binary's server, and what only
//! Postgres has: backend pids, sessions leaving `pg_stat_activity`, SQLSTATEs. Blocking (on
//! the binary's runtime), so that the shared scenarios and the async tests alike call
//! them.

use std::time::{Duration, Instant};

use diesel::sql_types::Integer;
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use diesel::result::DatabaseErrorKind;
use txretry::{Classification, Code, TransientKind, Verdict};

use crate::calls::block_on;
use crate::db::{count, exec};

/// The SQL dialect of the shared transfers (`tests/shared/transfers.rs`).
pub const DIALECT: crate::transfers::Dialect = crate::transfers::Dialect::Postgres;

/// This binary's connection type.
pub type Conn = AsyncPgConnection;

/// This binary's name, for test names and table prefixes.
pub const BINARY: &str = "diesel_async_postgres";

/// The SQLSTATE of a duplicate key on this server.
pub const UNIQUE_VIOLATION: &str = "23505";

/// What follows a `CREATE TABLE`'s column list.
pub const TABLE_OPTIONS: &str = "";

/// The server URL, or `None` when the test must skip (txretry-testkit printed why; with
/// `TXRETRY_REQUIRE_DB=1` it panics instead).
pub fn url(test: &str) -> Option<String> {
    txretry_testkit::postgres_url(test)
}

/// The session's backend process id.
pub fn backend_pid(conn: &mut Conn) -> i32 {
    block_on(diesel::select(diesel::dsl::sql::<Integer>("pg_backend_pid()")).get_result(conn))
        .expect("pg_backend_pid")
}

/// The session `connection_lost` ends: its backend's pid.
pub struct Victim(i32);

/// The session `conn` is, for [`end_session`].
pub fn victim(conn: &mut Conn) -> Victim {
    Victim(backend_pid(conn))
}

/// Ends `victim`'s session from `observer`: terminates its backend and waits until it has
/// gone.
pub async fn end_session(observer: &mut Conn, victim: &Victim) {
    exec(
        observer,
        &format!("SELECT pg_terminate_backend({})", victim.0),
    )
    .await;
    wait_until_gone(observer, victim.0).await;
}

/// Asserts that `err`, classified as `classification`, is what a statement gets on a
/// connection whose backend was terminated.
#[track_caller]
pub fn assert_connection_lost(err: &diesel::result::Error, classification: &Classification) {
    match err {
        // The usual case: the connection's task read the server's FATAL and ended, and
        // the statement found the connection closed (or its socket reset: an I/O error).
        // diesel-async keeps only the text, which the adapter reads back as a driver code.
        diesel::result::Error::DatabaseError(DatabaseErrorKind::UnableToSendCommand, info) => {
            let code = match info.message() {
                "connection closed" | "channel closed" => Code::Driver("connection closed"),
                "error communicating with the server" => Code::Driver("io"),
                other => panic!("an unexpected text: {other}"),
            };
            assert_eq!(classification.code, Some(code));
            assert_eq!(
                classification.verdict,
                Verdict::Transient(TransientKind::Connection)
            );
        }
        // The statement raced the FATAL and got it: 57P01 (admin_shutdown).
        other => {
            assert_eq!(diesel_sqlstate(other).as_deref(), Some("57P01"), "{err:?}");
            assert_eq!(
                classification.verdict,
                Verdict::Transient(TransientKind::Failover)
            );
        }
    }
}

/// Waits until session `pid` has left `pg_stat_activity` (it was terminated). Polls;
/// panics after 30 s.
async fn wait_until_gone(observer: &mut Conn, pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(observer, "pg_stat_activity", &format!("pid = {pid}")).await > 0 {
        assert!(Instant::now() < deadline, "session {pid} never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `Code::SqlState` for a literal.
pub fn sqlstate(code: &str) -> txretry::Code {
    txretry::Code::SqlState(txretry::SqlState::new(code).expect("a SQLSTATE"))
}

/// The SQLSTATE diesel-async kept on a database error.
pub fn diesel_sqlstate(err: &diesel::result::Error) -> Option<String> {
    match err {
        diesel::result::Error::DatabaseError(_, info) => {
            info.sqlstate().map(|s| s.as_str().to_owned())
        }
        _ => None,
    }
}

/// What the commit-fault proxy's answer looks like through diesel-async: tokio-postgres
/// reads the pooler's FATAL as the COMMIT's answer, `08P01`, and diesel-async keeps the
/// SQLSTATE.
pub fn lost_commit_code(err: &diesel::result::Error) -> txretry::Code {
    assert_eq!(diesel_sqlstate(err).as_deref(), Some("08P01"), "{err:?}");
    sqlstate("08P01")
}
