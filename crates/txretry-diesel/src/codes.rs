//! Reading a typed code out of `diesel::result::Error`.
//!
//! Diesel keeps less than the drivers under it: since 2.4 every Postgres error carries its
//! SQLSTATE, but a MySQL/MariaDB error keeps only its SQLSTATE (the errno is dropped, and
//! the lock-wait timeout 1205 shares the catch-all `HY000` with hundreds of others), and a
//! SQLite error keeps only its message and, for constraints, a [`DatabaseErrorKind`] (the
//! extended result code is dropped). Where the code is gone, the code is recovered from
//! the exact text the driver prints for it, checked together with what Diesel did keep
//! (the SQLSTATE on MySQL, the absence of one on SQLite), never from a phrase found
//! anywhere in a message.

use std::error::Error as StdError;

use diesel::result::{DatabaseErrorInformation, DatabaseErrorKind, Error};
use txretry_core::{Code, SqlState};

/// Which recoveries apply (Postgres' server errors need none: Diesel keeps their
/// SQLSTATE). The runners know their connection's backend; the registered [`extract`]
/// tries every backend compiled in.
#[derive(Clone, Copy)]
pub(crate) struct Backends {
    /// MySQL/MariaDB server errors: the errno from the server's or client library's text.
    pub(crate) mysql: bool,
    /// SQLite: the result code from SQLite's text.
    pub(crate) sqlite: bool,
    /// diesel-async's Postgres connection: tokio-postgres' text for a lost connection.
    pub(crate) tokio_postgres: bool,
    /// diesel-async's MySQL connection: mysql_async's text for a lost connection.
    pub(crate) mysql_async: bool,
}

impl Backends {
    /// No recovery: Postgres through libpq.
    pub(crate) const NONE: Backends = Backends {
        mysql: false,
        sqlite: false,
        tokio_postgres: false,
        mysql_async: false,
    };

    /// Every backend this build has.
    const ENABLED: Backends = Backends {
        mysql: cfg!(any(feature = "mysql", feature = "async-mysql")),
        sqlite: cfg!(feature = "sqlite"),
        tokio_postgres: cfg!(feature = "async-postgres"),
        mysql_async: cfg!(feature = "async-mysql"),
    };
}

/// Reads the typed code from one `diesel::result::Error` (the default classifier calls it
/// for each link of an error's chain); `None` for other error types and for Diesel errors
/// with no code (`NotFound`, a deserialization error, …).
///
/// | Diesel error | code |
/// |---|---|
/// | Postgres `DatabaseError`: its SQLSTATE (Diesel 2.4 keeps it) | `Code::SqlState(..)` |
/// | MySQL/MariaDB `DatabaseError`, SQLSTATE `40001`, message `Deadlock found when trying to get lock…` | `Code::MySql(1213)` |
/// | MySQL/MariaDB, `HY000`, `Lock wait timeout exceeded…` | `Code::MySql(1205)` |
/// | MySQL/MariaDB, `HY000`, `Lost connection to (MySQL) server…` / `(MySQL) server has gone away` | `Code::MySql(2013)` / `Code::MySql(2006)` |
/// | MySQL/MariaDB, any other `HY000` (the catch-all: no typed code) | `None`: the message fallback decides |
/// | MySQL/MariaDB, any other SQLSTATE | `Code::SqlState(..)` |
/// | SQLite, message `database is locked` (what SQLite prints for `SQLITE_BUSY` and its extended codes) | `Code::Sqlite(5)` |
/// | SQLite, `database table is locked…` / `database schema is locked…` (`SQLITE_LOCKED`) | `Code::Sqlite(6)` |
/// | SQLite, a unique, foreign-key, not-null or check violation | `Code::Sqlite(19)` (`SQLITE_CONSTRAINT`) |
/// | SQLite, `database or disk is full` / `attempt to write a readonly database` | `Code::Sqlite(13)` / `Code::Sqlite(8)` |
/// | SQLite, `cannot commit - no transaction is active` (SQLite ended the transaction itself: `RAISE(ROLLBACK)`, `INSERT OR ROLLBACK`) | `Code::Sqlite(1)` |
/// | `DatabaseError(ClosedConnection, _)` without a SQLSTATE | `Code::Driver("connection closed")` |
/// | diesel-async Postgres (feature `async-postgres`), `UnableToSendCommand` with tokio-postgres' text `connection closed`, or diesel-async's `channel closed` (the connection's task ended) | `Code::Driver("connection closed")` |
/// | diesel-async Postgres, `UnableToSendCommand`, `error communicating with the server` (tokio-postgres' I/O failure) | `Code::Driver("io")` |
/// | diesel-async MySQL (feature `async-mysql`), `Unknown` without a SQLSTATE, mysql_async's `Input/output error: …` | `Code::Driver("io")` |
/// | diesel-async MySQL, ``Driver error: `Connection to the server is closed.'`` / ``Driver error: `Packet out of order.'`` | `Code::Driver("connection closed")` / `Code::Driver("packet out of order")` |
/// | `BrokenTransactionManager` | `Code::Driver("transaction manager broken")` |
/// | `RollbackErrorOnCommit { commit_error, .. }` | the code of `commit_error` |
///
/// The recovered MySQL and SQLite codes are the primary codes whose exact text the driver
/// prints: SQLite's extended codes (517 `SQLITE_BUSY_SNAPSHOT`, …) all read as 5, since
/// SQLite prints the same text for them. A phrase alone is never enough: the SQLSTATE
/// Diesel kept must agree (MySQL), or there must be none (SQLite), and the message must
/// begin with the phrase.
///
/// It is registered with the default classifier, so `txretry::classify` and
/// `RetryPolicy::default()` already use it; call it yourself from a custom classifier.
///
/// ```
/// use diesel::result::{DatabaseErrorKind, Error};
/// use txretry::Code;
///
/// // What a SQLite connection returns for SQLITE_BUSY: no code, only SQLite's text.
/// let busy = Error::DatabaseError(DatabaseErrorKind::Unknown, Box::new("database is locked".to_string()));
/// assert_eq!(txretry::diesel::extract(&busy), Some(Code::Sqlite(5)));
/// assert_eq!(txretry::diesel::extract(&Error::NotFound), None);
/// ```
pub fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
    extract_for(error, Backends::ENABLED)
}

txretry_core::register_extractor!(extract);

/// [`extract`] for the backends in `backends` only.
pub(crate) fn extract_for(error: &(dyn StdError + 'static), backends: Backends) -> Option<Code> {
    diesel_code(error.downcast_ref::<Error>()?, backends)
}

fn diesel_code(error: &Error, backends: Backends) -> Option<Code> {
    match error {
        Error::DatabaseError(kind, info) => database_code(*kind, &**info, backends),
        // The COMMIT's own answer says what happened to the transaction; the failed
        // ROLLBACK after it is why the runner cannot use the connection again.
        Error::RollbackErrorOnCommit { commit_error, .. } => diesel_code(commit_error, backends),
        Error::BrokenTransactionManager => Some(Code::Driver("transaction manager broken")),
        _ => None,
    }
}

fn database_code(
    kind: DatabaseErrorKind,
    info: &(dyn DatabaseErrorInformation + Send + Sync),
    backends: Backends,
) -> Option<Code> {
    let message = info.message();
    match info.sqlstate() {
        Some(state) => {
            let state = state.as_str();
            if backends.mysql {
                if let Some(errno) = mysql_errno(state, message) {
                    return Some(Code::MySql(errno));
                }
                // MySQL's catch-all is no typed code (Postgres never sends it): leave the
                // error to the message fallback.
                if state == MYSQL_CATCH_ALL {
                    return None;
                }
            }
            SqlState::new(state).map(Code::SqlState)
        }
        None => {
            if backends.sqlite
                && let Some(code) = sqlite_code(kind, message)
            {
                return Some(code);
            }
            if let Some(code) = async_driver_code(kind, message, backends) {
                return Some(code);
            }
            (kind == DatabaseErrorKind::ClosedConnection)
                .then_some(Code::Driver("connection closed"))
        }
    }
}

/// MySQL's SQLSTATE for errors that have no specific one (1205 among them).
const MYSQL_CATCH_ALL: &str = "HY000";

/// The MySQL/MariaDB errno whose exact text (server or client library) `message` begins
/// with, when the SQLSTATE agrees.
fn mysql_errno(state: &str, message: &str) -> Option<u16> {
    const PHRASES: [(&str, &str, u16); 7] = [
        // ER_LOCK_DEADLOCK
        ("40001", "Deadlock found when trying to get lock", 1213),
        // ER_LOCK_WAIT_TIMEOUT
        ("HY000", "Lock wait timeout exceeded", 1205),
        // CR_SERVER_LOST: libmysqlclient's text, MariaDB Connector/C's.
        ("HY000", "Lost connection to MySQL server", 2013),
        ("HY000", "Lost connection to server", 2013),
        // CR_SERVER_GONE_ERROR: the same two libraries.
        ("HY000", "MySQL server has gone away", 2006),
        ("HY000", "Server has gone away", 2006),
        // ER_CON_COUNT_ERROR
        ("08004", "Too many connections", 1040),
    ];
    PHRASES
        .iter()
        .find(|(s, phrase, _)| *s == state && message.starts_with(phrase))
        .map(|(_, _, errno)| *errno)
}

/// The driver failure behind a diesel-async error that has no server code: diesel-async
/// keeps only the driver error's text (`Box<String>`), and the connection-breaking ones
/// are recovered from that exact text, together with the kind diesel-async gives them
/// (tokio-postgres: `UnableToSendCommand`; mysql_async: `Unknown`). The codes are those
/// txretry's tokio-postgres and mysql_async adapters read from the typed errors.
fn async_driver_code(kind: DatabaseErrorKind, message: &str, backends: Backends) -> Option<Code> {
    if backends.tokio_postgres && kind == DatabaseErrorKind::UnableToSendCommand {
        match message {
            // tokio-postgres' `Kind::Closed`, and diesel-async's own text when the
            // connection's background task is gone (its error channel closed).
            "connection closed" | "channel closed" => {
                return Some(Code::Driver("connection closed"));
            }
            // tokio-postgres' `Kind::Io`: the socket failed, which ends its connection.
            "error communicating with the server" => return Some(Code::Driver("io")),
            _ => {}
        }
    }
    if backends.mysql_async && kind == DatabaseErrorKind::Unknown {
        if message.starts_with("Input/output error: ") {
            return Some(Code::Driver("io"));
        }
        match message {
            "Driver error: `Connection to the server is closed.'" => {
                return Some(Code::Driver("connection closed"));
            }
            "Driver error: `Packet out of order.'" => {
                return Some(Code::Driver("packet out of order"));
            }
            _ => {}
        }
    }
    None
}

/// The SQLite primary result code behind a Diesel SQLite error: recovered from the text
/// `sqlite3_errmsg` gives for it, or from the constraint kind Diesel mapped it to.
fn sqlite_code(kind: DatabaseErrorKind, message: &str) -> Option<Code> {
    const SQLITE_ERROR: i32 = 1;
    const SQLITE_BUSY: i32 = 5;
    const SQLITE_LOCKED: i32 = 6;
    const SQLITE_READONLY: i32 = 8;
    const SQLITE_FULL: i32 = 13;
    const SQLITE_CONSTRAINT: i32 = 19;
    match kind {
        DatabaseErrorKind::UniqueViolation
        | DatabaseErrorKind::ForeignKeyViolation
        | DatabaseErrorKind::NotNullViolation
        | DatabaseErrorKind::CheckViolation => return Some(Code::Sqlite(SQLITE_CONSTRAINT)),
        _ => {}
    }
    if message == "database is locked" {
        Some(Code::Sqlite(SQLITE_BUSY))
    } else if message.starts_with("database table is locked")
        || message.starts_with("database schema is locked")
    {
        Some(Code::Sqlite(SQLITE_LOCKED))
    } else {
        // SQLite's answers that nothing was written: without a code a failed COMMIT would
        // be judged as one whose outcome is unknown, and run again when idempotent.
        match message {
            "database or disk is full" => Some(Code::Sqlite(SQLITE_FULL)),
            "attempt to write a readonly database" => Some(Code::Sqlite(SQLITE_READONLY)),
            "cannot commit - no transaction is active" => Some(Code::Sqlite(SQLITE_ERROR)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database error as Diesel builds one, with an SQLSTATE (Postgres, MySQL) or none
    /// (SQLite).
    struct Info(&'static str, Option<&'static str>);

    impl DatabaseErrorInformation for Info {
        fn message(&self) -> &str {
            self.0
        }
        fn details(&self) -> Option<&str> {
            None
        }
        fn hint(&self) -> Option<&str> {
            None
        }
        fn table_name(&self) -> Option<&str> {
            None
        }
        fn column_name(&self) -> Option<&str> {
            None
        }
        fn constraint_name(&self) -> Option<&str> {
            None
        }
        fn statement_position(&self) -> Option<i32> {
            None
        }
        fn sqlstate(&self) -> Option<diesel::result::SqlState> {
            self.1.and_then(|s| s.parse().ok())
        }
    }

    fn db(kind: DatabaseErrorKind, message: &'static str, state: Option<&'static str>) -> Error {
        Error::DatabaseError(kind, Box::new(Info(message, state)))
    }

    const ALL: Backends = Backends {
        mysql: true,
        sqlite: true,
        tokio_postgres: true,
        mysql_async: true,
    };
    const PG: Backends = Backends::NONE;
    const MYSQL: Backends = Backends {
        mysql: true,
        ..Backends::NONE
    };
    const SQLITE: Backends = Backends {
        sqlite: true,
        ..Backends::NONE
    };
    const ASYNC_PG: Backends = Backends {
        tokio_postgres: true,
        ..Backends::NONE
    };
    const ASYNC_MYSQL: Backends = Backends {
        mysql: true,
        mysql_async: true,
        ..Backends::NONE
    };

    /// What diesel-async builds for a driver error with no server code: its text.
    fn text(kind: DatabaseErrorKind, message: &str) -> Error {
        Error::DatabaseError(kind, Box::new(message.to_owned()))
    }

    #[test]
    fn diesel_async_lost_connections_are_recovered_from_the_drivers_text() {
        use DatabaseErrorKind::{UnableToSendCommand, Unknown};
        let closed = Some(Code::Driver("connection closed"));
        for backends in [ASYNC_PG, ALL] {
            for message in ["connection closed", "channel closed"] {
                let error = text(UnableToSendCommand, message);
                assert_eq!(diesel_code(&error, backends), closed, "{message}");
            }
            let io = text(UnableToSendCommand, "error communicating with the server");
            assert_eq!(diesel_code(&io, backends), Some(Code::Driver("io")));
            // A value that did not serialize: no connection lost.
            let serialize = text(UnableToSendCommand, "error serializing parameter 0");
            assert_eq!(diesel_code(&serialize, backends), None);
            // The right text under another kind (the caller's own error) is not recovered.
            assert_eq!(
                diesel_code(&text(Unknown, "connection closed"), ASYNC_PG),
                None
            );
        }
        for backends in [ASYNC_MYSQL, ALL] {
            let io = text(
                Unknown,
                "Input/output error: Input/output error: broken pipe",
            );
            assert_eq!(diesel_code(&io, backends), Some(Code::Driver("io")));
            let gone = text(
                Unknown,
                "Driver error: `Connection to the server is closed.'",
            );
            assert_eq!(diesel_code(&gone, backends), closed);
            let other = text(
                Unknown,
                "Driver error: `Error converting from mysql value.'",
            );
            assert_eq!(diesel_code(&other, backends), None);
        }
        // Without the async backends (libpq, libmysqlclient), the same text has no code.
        let io = text(UnableToSendCommand, "error communicating with the server");
        assert_eq!(diesel_code(&io, PG), None);
        assert_eq!(diesel_code(&io, MYSQL), None);
    }

    fn sqlstate(s: &str) -> Option<Code> {
        Some(Code::SqlState(SqlState::new(s).unwrap()))
    }

    #[test]
    fn postgres_sqlstates_are_kept() {
        use DatabaseErrorKind::*;
        let deadlock = db(Unknown, "deadlock detected", Some("40P01"));
        let serialization = db(
            SerializationFailure,
            "could not serialize access",
            Some("40001"),
        );
        let raised = db(Unknown, "deadlock in order 17", Some("P0001"));
        for backends in [PG, ALL] {
            assert_eq!(diesel_code(&deadlock, backends), sqlstate("40P01"));
            assert_eq!(diesel_code(&serialization, backends), sqlstate("40001"));
            assert_eq!(diesel_code(&raised, backends), sqlstate("P0001"));
        }
    }

    #[test]
    fn mysql_errnos_are_recovered_when_text_and_sqlstate_agree() {
        use DatabaseErrorKind::Unknown;
        let deadlock = db(
            Unknown,
            "Deadlock found when trying to get lock; try restarting transaction",
            Some("40001"),
        );
        let wait = db(
            Unknown,
            "Lock wait timeout exceeded; try restarting transaction",
            Some("HY000"),
        );
        let lost = db(
            Unknown,
            "Lost connection to MySQL server during query",
            Some("HY000"),
        );
        for backends in [MYSQL, ALL] {
            assert_eq!(diesel_code(&deadlock, backends), Some(Code::MySql(1213)));
            assert_eq!(diesel_code(&wait, backends), Some(Code::MySql(1205)));
            assert_eq!(diesel_code(&lost, backends), Some(Code::MySql(2013)));
        }
    }

    #[test]
    fn a_phrase_with_the_wrong_sqlstate_or_not_at_the_start_is_not_recovered() {
        use DatabaseErrorKind::Unknown;
        // A SIGNAL with a custom SQLSTATE, a message quoting the phrase later on.
        let signalled = db(Unknown, "Lock wait timeout exceeded", Some("45000"));
        assert_eq!(diesel_code(&signalled, MYSQL), sqlstate("45000"));
        let quoted = db(
            Unknown,
            "order 17: Lock wait timeout exceeded upstream",
            Some("HY000"),
        );
        assert_eq!(diesel_code(&quoted, MYSQL), None);
    }

    #[test]
    fn mysql_catch_all_is_no_code() {
        let other = db(
            DatabaseErrorKind::Unknown,
            "Record has changed since last read",
            Some("HY000"),
        );
        assert_eq!(diesel_code(&other, MYSQL), None);
        assert_eq!(diesel_code(&other, ALL), None);
        let unique = db(
            DatabaseErrorKind::UniqueViolation,
            "Duplicate entry '1' for key 'PRIMARY'",
            Some("23000"),
        );
        assert_eq!(diesel_code(&unique, MYSQL), sqlstate("23000"));
    }

    #[test]
    fn sqlite_codes_are_recovered_from_sqlites_own_text() {
        use DatabaseErrorKind::*;
        let busy = db(Unknown, "database is locked", None);
        let locked = db(Unknown, "database table is locked: item", None);
        let unique = db(UniqueViolation, "UNIQUE constraint failed: item.id", None);
        let quoted = db(Unknown, "refund refused: database is locked", None);
        let full = db(Unknown, "database or disk is full", None);
        let read_only = db(Unknown, "attempt to write a readonly database", None);
        let ended = db(Unknown, "cannot commit - no transaction is active", None);
        for backends in [SQLITE, ALL] {
            assert_eq!(diesel_code(&full, backends), Some(Code::Sqlite(13)));
            assert_eq!(diesel_code(&read_only, backends), Some(Code::Sqlite(8)));
            assert_eq!(diesel_code(&ended, backends), Some(Code::Sqlite(1)));
            assert_eq!(diesel_code(&busy, backends), Some(Code::Sqlite(5)));
            assert_eq!(diesel_code(&locked, backends), Some(Code::Sqlite(6)));
            assert_eq!(diesel_code(&unique, backends), Some(Code::Sqlite(19)));
            assert_eq!(diesel_code(&quoted, backends), None);
        }
        // Without the SQLite backend, the same text has no code.
        assert_eq!(diesel_code(&busy, PG), None);
    }

    #[test]
    fn connection_failures_and_a_broken_manager_are_driver_codes() {
        let closed = db(
            DatabaseErrorKind::ClosedConnection,
            "server closed the connection unexpectedly",
            None,
        );
        assert_eq!(
            diesel_code(&closed, PG),
            Some(Code::Driver("connection closed"))
        );
        assert_eq!(
            diesel_code(&Error::BrokenTransactionManager, ALL),
            Some(Code::Driver("transaction manager broken"))
        );
    }

    #[test]
    fn a_failed_rollback_after_commit_reads_the_commits_code() {
        let error = Error::RollbackErrorOnCommit {
            rollback_error: Box::new(Error::BrokenTransactionManager),
            commit_error: Box::new(db(
                DatabaseErrorKind::SerializationFailure,
                "could not serialize access",
                Some("40001"),
            )),
        };
        assert_eq!(diesel_code(&error, PG), sqlstate("40001"));
    }

    #[test]
    fn other_errors_have_no_code() {
        assert_eq!(extract(&Error::NotFound), None);
        assert_eq!(extract(&std::io::Error::other("database is locked")), None);
    }
}
