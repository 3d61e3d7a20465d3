//! Reading typed codes out of sqlx's errors.
//!
//! The extractor is registered with the default classifier, so `txretry::classify` and
//! `RetryPolicy::default()` understand sqlx errors once a `sqlx-*` feature is on.

use std::error::Error as StdError;

use sqlx::error::DatabaseError;
use txretry_core::Code;
#[cfg(feature = "postgres")]
use txretry_core::SqlState;

#[cfg(feature = "mysql")]
use crate::LockNotGranted;
#[cfg(feature = "mysql")]
use sqlx::mysql::MySqlDatabaseError;
#[cfg(feature = "postgres")]
use sqlx::postgres::PgDatabaseError;
#[cfg(feature = "sqlite")]
use sqlx_sqlite::SqliteError;

/// Returns the code of `$error` when it is one of the database error types of the enabled
/// features, downcast with `$downcast`: `downcast_ref` on a `dyn Error` (a link of a
/// `source()` chain), `try_downcast_ref` on a `dyn DatabaseError` (inside
/// `sqlx::Error::Database`). One table for both, so a new type is added once.
macro_rules! code_by_type {
    ($error:expr, $downcast:ident) => {
        #[cfg(feature = "postgres")]
        if let Some(error) = $error.$downcast::<PgDatabaseError>() {
            return postgres_code(error);
        }
        #[cfg(feature = "mysql")]
        if let Some(error) = $error.$downcast::<MySqlDatabaseError>() {
            return Some(mysql_code(error));
        }
        #[cfg(feature = "mysql")]
        if let Some(error) = $error.$downcast::<LockNotGranted>() {
            return Some(Code::MySql(error.number()));
        }
        #[cfg(feature = "postgres")]
        if $error.$downcast::<crate::NotPrimary>().is_some() {
            return Some(Code::SqlState(READ_ONLY_SQL_TRANSACTION));
        }
        #[cfg(feature = "sqlite")]
        if let Some(error) = $error.$downcast::<SqliteError>() {
            return sqlite_code(error);
        }
    };
}

/// The typed code of one error value, if it is one of sqlx's: [`sqlx::Error`], the
/// `Box<dyn DatabaseError>` that `sqlx::Error::Database` exposes as its `source()`, or a
/// database error type of an enabled feature (`PgDatabaseError`, `MySqlDatabaseError`,
/// `SqliteError`). Any other type gives `None`.
///
/// This is the extractor the crate registers with the default classifier; it looks at this
/// one value only (the classifier walks the `source()` chain). Use it when you build a
/// [`Classifier`](txretry_core::Classifier) of your own from a closure.
///
/// ```
/// use txretry_core::Code;
///
/// let err = sqlx::Error::PoolTimedOut;
/// assert_eq!(txretry_sqlx::extract(&err), Some(Code::Driver("pool timed out")));
/// assert_eq!(txretry_sqlx::extract(&std::fmt::Error), None);
/// ```
pub fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
    if let Some(error) = error.downcast_ref::<sqlx::Error>() {
        return error_code(error);
    }
    // `sqlx::Error::Database(Box<dyn DatabaseError>)::source()` is the box itself.
    if let Some(error) = error.downcast_ref::<Box<dyn DatabaseError>>() {
        return database_error_code(&**error);
    }
    code_by_type!(error, downcast_ref);
    None
}

/// What a host that does not accept writes answers a write with.
#[cfg(feature = "postgres")]
const READ_ONLY_SQL_TRANSACTION: SqlState = SqlState::from_static("25006");

txretry_core::register_extractor!(extract);

/// The typed code of a [`sqlx::Error`]:
///
/// | variant | code |
/// |---|---|
/// | `Database` from Postgres | [`Code::SqlState`] (`PgDatabaseError::code()`) |
/// | `Database` from MySQL / MariaDB | [`Code::MySql`] with the errno (`MySqlDatabaseError::number()`); the SQLSTATE is ignored, it is too coarse (1205 is `HY000`) |
/// | `Database` holding a [`LockNotGranted`] (feature `mysql`: database-backed admission could not take a named lock) | [`Code::MySql`] with its number, 1205 or 1317 |
/// | `Database` from SQLite | [`Code::Sqlite`] with the extended result code (e.g. 517) |
/// | `Io` whose kind means the connection broke (reset, aborted, EOF, …), or `Tls` wrapping such an I/O error | `Code::Driver("io")`, by the core's [`io_code`](txretry_core::io_code) |
/// | `PoolTimedOut` | `Code::Driver("pool timed out")` |
/// | `WorkerCrashed` (SQLite's connection thread died) | `Code::Driver("worker crashed")` |
/// | `Protocol` (the connection's byte stream is out of step) | `Code::Driver("protocol")` |
/// | `BeginFailed` (the connection was not in a transaction after BEGIN) | `Code::Driver("begin failed")` |
/// | anything else | `None` |
///
/// The I/O rule is the core's own, applied here as well as by the core's extractor on the
/// `source()` link, so that an `Io` error still counts when the application wraps
/// `sqlx::Error` in an error type of its own (one level deeper than the classifier's
/// default depth). `PoolClosed` is `None`: the application closed the pool, and no retry
/// will reopen it.
///
/// A `Database` error of a database whose feature is off here (e.g. a MySQL error when only
/// `postgres` is enabled) has no code; the classifier then falls back to the message.
///
/// ```
/// use txretry_core::Code;
///
/// assert_eq!(txretry_sqlx::error_code(&sqlx::Error::WorkerCrashed), Some(Code::Driver("worker crashed")));
/// assert_eq!(txretry_sqlx::error_code(&sqlx::Error::RowNotFound), None);
/// ```
pub fn error_code(error: &sqlx::Error) -> Option<Code> {
    match error {
        sqlx::Error::Database(database) => database_error_code(&**database),
        sqlx::Error::Io(io) => txretry_core::io_code(io),
        sqlx::Error::Tls(tls) => tls
            .downcast_ref::<std::io::Error>()
            .and_then(txretry_core::io_code),
        sqlx::Error::PoolTimedOut => Some(Code::Driver("pool timed out")),
        sqlx::Error::WorkerCrashed => Some(Code::Driver("worker crashed")),
        sqlx::Error::Protocol(_) => Some(Code::Driver("protocol")),
        sqlx::Error::BeginFailed => Some(Code::Driver("begin failed")),
        _ => None,
    }
}

/// The typed code of a database error, for the database types of the enabled features
/// (see [`error_code`]); `None` for any other `DatabaseError` implementation.
pub fn database_error_code(error: &dyn DatabaseError) -> Option<Code> {
    code_by_type!(error, try_downcast_ref);
    let _ = error;
    None
}

#[cfg(feature = "postgres")]
fn postgres_code(error: &PgDatabaseError) -> Option<Code> {
    SqlState::new(error.code()).map(Code::SqlState)
}

#[cfg(feature = "mysql")]
fn mysql_code(error: &MySqlDatabaseError) -> Code {
    Code::MySql(error.number())
}

#[cfg(feature = "sqlite")]
fn sqlite_code(error: &SqliteError) -> Option<Code> {
    // sqlx keeps the extended result code private and reports it as text ("517").
    DatabaseError::code(error)?.parse().ok().map(Code::Sqlite)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::fmt;

    use super::*;

    #[test]
    fn pool_timeout_is_a_driver_code() {
        let err = sqlx::Error::PoolTimedOut;
        assert_eq!(extract(&err), Some(Code::Driver("pool timed out")));
        let c = txretry_core::classify(&err);
        assert_eq!(
            c.verdict.kind(),
            Some(txretry_core::TransientKind::Connection)
        );
        assert_eq!(c.code, Some(Code::Driver("pool timed out")));
    }

    #[test]
    fn worker_crash_protocol_and_begin_failed_are_driver_codes() {
        assert_eq!(
            error_code(&sqlx::Error::WorkerCrashed),
            Some(Code::Driver("worker crashed"))
        );
        assert_eq!(
            error_code(&sqlx::Error::Protocol("bad".into())),
            Some(Code::Driver("protocol"))
        );
        assert_eq!(
            error_code(&sqlx::Error::BeginFailed),
            Some(Code::Driver("begin failed"))
        );
    }

    #[test]
    fn pool_closed_and_row_not_found_have_no_code() {
        assert_eq!(error_code(&sqlx::Error::PoolClosed), None);
        assert_eq!(error_code(&sqlx::Error::RowNotFound), None);
        let c = txretry_core::classify(&sqlx::Error::PoolClosed);
        assert_eq!(c.verdict, txretry_core::Verdict::Permanent);
        assert_eq!(c.code, None);
    }

    #[test]
    fn broken_connection_io_is_a_driver_code_by_the_core_rule() {
        let err = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(extract(&err), Some(Code::Driver("io")));
        let c = txretry_core::classify(&err);
        assert_eq!(c.code, Some(Code::Driver("io")));
        assert_eq!(
            c.verdict.kind(),
            Some(txretry_core::TransientKind::Connection)
        );

        let tls = sqlx::Error::Tls(Box::new(std::io::Error::from(
            std::io::ErrorKind::UnexpectedEof,
        )));
        assert_eq!(extract(&tls), Some(Code::Driver("io")));

        // Not a connection-ish kind: no code at all, permanent.
        let err = sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::InvalidData));
        assert_eq!(extract(&err), None);
        assert_eq!(txretry_core::classify(&err).code, None);
    }

    /// The application's own error type around `sqlx::Error`: the io::Error is two levels
    /// down, past the default depth, and still recognised.
    #[test]
    fn io_inside_a_wrapped_sqlx_error_is_recognised() {
        #[derive(Debug)]
        struct AppError(sqlx::Error);
        impl fmt::Display for AppError {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("saving the order failed")
            }
        }
        impl StdError for AppError {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let err = AppError(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        )));
        let c = txretry_core::classify(&err);
        assert_eq!(c.code, Some(Code::Driver("io")));
        assert_eq!(
            c.verdict.kind(),
            Some(txretry_core::TransientKind::Connection)
        );
    }

    /// A `DatabaseError` of a driver this crate does not know.
    #[derive(Debug)]
    struct Foreign;
    impl fmt::Display for Foreign {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Deadlock found when trying to get lock")
        }
    }
    impl StdError for Foreign {}
    impl DatabaseError for Foreign {
        fn message(&self) -> &str {
            "Deadlock found when trying to get lock"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed("40001"))
        }
        fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    #[test]
    fn unknown_database_error_types_have_no_code_and_fall_back_to_the_message() {
        let err = sqlx::Error::Database(Box::new(Foreign));
        assert_eq!(extract(&err), None);
        // The source() link is the Box<dyn DatabaseError>: also no code.
        let link = StdError::source(&err).expect("Database has a source");
        assert_eq!(extract(link), None);
        // The message fallback matches MySQL's own phrase, and reports it whole.
        let c = txretry_core::classify(&err);
        assert_eq!(
            c.verdict,
            txretry_core::Verdict::Transient(txretry_core::TransientKind::Deadlock)
        );
        assert_eq!(
            c.code,
            Some(Code::Message("Deadlock found when trying to get lock"))
        );
    }

    /// A foreign database error whose text merely mentions a deadlock is not one.
    #[test]
    fn unknown_database_error_mentioning_a_deadlock_is_permanent() {
        #[derive(Debug)]
        struct Refused;
        impl fmt::Display for Refused {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("refund refused: customer reports a deadlock at checkout")
            }
        }
        impl StdError for Refused {}
        impl DatabaseError for Refused {
            fn message(&self) -> &str {
                "refund refused: customer reports a deadlock at checkout"
            }
            fn as_error(&self) -> &(dyn StdError + Send + Sync + 'static) {
                self
            }
            fn as_error_mut(&mut self) -> &mut (dyn StdError + Send + Sync + 'static) {
                self
            }
            fn into_error(self: Box<Self>) -> Box<dyn StdError + Send + Sync + 'static> {
                self
            }
            fn kind(&self) -> sqlx::error::ErrorKind {
                sqlx::error::ErrorKind::Other
            }
        }
        let err = sqlx::Error::Database(Box::new(Refused));
        assert_eq!(extract(&err), None);
        assert_eq!(
            txretry_core::classify(&err),
            txretry_core::Classification::PERMANENT
        );
    }

    #[cfg(feature = "sqlite")]
    mod sqlite {
        use super::*;
        use sqlx::sqlite::SqlitePoolOptions;

        async fn unique_violation() -> sqlx::Error {
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect("sqlite::memory:")
                .await
                .unwrap();
            sqlx::raw_sql("CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1)")
                .execute(&pool)
                .await
                .unwrap();
            sqlx::query("INSERT INTO t VALUES (1)")
                .execute(&pool)
                .await
                .unwrap_err()
        }

        #[tokio::test(flavor = "current_thread")]
        async fn sqlite_error_gives_the_extended_code_at_every_link() {
            let err = unique_violation().await;
            // SQLITE_CONSTRAINT_PRIMARYKEY = 1555.
            assert_eq!(extract(&err), Some(Code::Sqlite(1555)));
            let link = StdError::source(&err).unwrap();
            assert_eq!(extract(link), Some(Code::Sqlite(1555)));
            let bare = err.into_database_error().unwrap().downcast::<SqliteError>();
            assert_eq!(extract(&*bare), Some(Code::Sqlite(1555)));
            let c = txretry_core::classify(&*bare);
            assert_eq!(c.verdict, txretry_core::Verdict::Permanent);
            assert_eq!(c.code, Some(Code::Sqlite(1555)));
        }
    }
}
