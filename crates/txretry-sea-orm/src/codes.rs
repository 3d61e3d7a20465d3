//! Reading typed codes out of SeaORM's errors.
//!
//! A `DbErr` from SeaORM's sqlx drivers carries the `sqlx::Error` it came from; its code is
//! read by txretry-sqlx's extractor, so the code tables live in one place. The extractor is
//! registered with the default classifier, so `txretry::classify` and
//! `RetryPolicy::default()` understand `DbErr` once a `sea-orm-*` feature is on.

use std::error::Error as StdError;

// SeaORM's own re-export: the very sqlx that txretry-sqlx reads (one sqlx 0.9 in the graph).
use sea_orm::sqlx;
use sea_orm::{ConnAcquireErr, DbErr, RuntimeErr};
use txretry_core::Code;

/// The typed code of one error value, if it is one of SeaORM's: a [`DbErr`] or the
/// [`RuntimeErr`] that `DbErr::Conn`, `Exec` and `Query` expose as their `source()`. Any
/// other type gives `None`.
///
/// This is the extractor the crate registers with the default classifier; it looks at this
/// one value only (the classifier walks the `source()` chain). Use it when you build a
/// [`Classifier`](txretry_core::Classifier) of your own from a closure.
///
/// ```
/// use sea_orm::{ConnAcquireErr, DbErr};
/// use txretry_core::Code;
///
/// let err = DbErr::ConnectionAcquire(ConnAcquireErr::Timeout);
/// assert_eq!(txretry_sea_orm::extract(&err), Some(Code::Driver("pool timed out")));
/// assert_eq!(txretry_sea_orm::extract(&std::fmt::Error), None);
/// ```
pub fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
    if let Some(error) = error.downcast_ref::<DbErr>() {
        return error_code(error);
    }
    if let Some(error) = error.downcast_ref::<RuntimeErr>() {
        return runtime_sqlx_error(error).and_then(txretry_sqlx::error_code);
    }
    None
}

txretry_core::register_extractor!(extract);

/// The typed code of a [`DbErr`]:
///
/// | variant | code |
/// |---|---|
/// | `Conn`, `Exec`, `Query` holding `RuntimeErr::SqlxError` | the `sqlx::Error`'s, by [`txretry_sqlx::error_code`]: `Code::SqlState` (Postgres), `Code::MySql(errno)`, `Code::Sqlite(extended code)`, `Code::Driver(..)` for I/O, protocol and pool failures |
/// | `ConnectionAcquire(Timeout)` (SeaORM's name for sqlx's `PoolTimedOut`) | `Code::Driver("pool timed out")`, as for sqlx |
/// | `ConnectionAcquire(ConnectionClosed)` (sqlx's `PoolClosed`: the application closed the pool) | `None`, as for sqlx: no retry reopens it |
/// | `Conn`, `Exec`, `Query` holding `RuntimeErr::Internal` (SeaORM's own text) | `None` |
/// | anything else (`RecordNotFound`, `Custom`, `Type`, …: SeaORM's or the application's own outcomes) | `None` |
///
/// A variant with no code is permanent unless the classifier's message fallback matches
/// the text (it does only when no link of the chain has a typed code).
///
/// ```
/// use sea_orm::DbErr;
///
/// assert_eq!(txretry_sea_orm::error_code(&DbErr::RecordNotFound("order 7".into())), None);
/// ```
pub fn error_code(error: &DbErr) -> Option<Code> {
    match error {
        // SeaORM turns sqlx's pool errors into these; the code is sqlx's.
        DbErr::ConnectionAcquire(ConnAcquireErr::Timeout) => {
            txretry_sqlx::error_code(&sqlx::Error::PoolTimedOut)
        }
        _ => sqlx_error(error).and_then(txretry_sqlx::error_code),
    }
}

/// The `sqlx::Error` inside a [`DbErr`], if SeaORM's sqlx driver produced it
/// (`DbErr::Conn`, `Exec` or `Query` holding `RuntimeErr::SqlxError`).
///
/// ```
/// use sea_orm::DbErr;
///
/// assert!(txretry_sea_orm::sqlx_error(&DbErr::Custom("refused".into())).is_none());
/// ```
pub fn sqlx_error(error: &DbErr) -> Option<&sqlx::Error> {
    match error {
        DbErr::Conn(runtime) | DbErr::Exec(runtime) | DbErr::Query(runtime) => {
            runtime_sqlx_error(runtime)
        }
        _ => None,
    }
}

/// The `sqlx::Error` a [`RuntimeErr`] holds, if any.
fn runtime_sqlx_error(error: &RuntimeErr) -> Option<&sqlx::Error> {
    match error {
        RuntimeErr::SqlxError(error) => Some(error),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use txretry_core::{Classification, TransientKind, Verdict};

    use super::*;

    /// The mapping only; the real errors are provoked on real servers in the
    /// `sea-orm-*` integration tests.
    #[test]
    fn the_sqlx_error_inside_decides_at_every_link() {
        let io = || sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        for err in [
            DbErr::Conn(RuntimeErr::SqlxError(Arc::new(io()))),
            DbErr::Exec(RuntimeErr::SqlxError(Arc::new(io()))),
            DbErr::Query(RuntimeErr::SqlxError(Arc::new(io()))),
        ] {
            assert_eq!(extract(&err), Some(Code::Driver("io")), "{err:?}");
            // The source() link is the RuntimeErr: the same code.
            let link = StdError::source(&err).expect("DbErr::Exec has a source");
            assert_eq!(extract(link), Some(Code::Driver("io")));
            let c = txretry_core::classify(&err);
            assert_eq!(c.verdict, Verdict::Transient(TransientKind::Connection));
        }
    }

    #[test]
    fn pool_errors_read_as_sqlx_reads_them() {
        let timeout = DbErr::ConnectionAcquire(ConnAcquireErr::Timeout);
        assert_eq!(
            extract(&timeout),
            txretry_sqlx::error_code(&sqlx::Error::PoolTimedOut)
        );
        let closed = DbErr::ConnectionAcquire(ConnAcquireErr::ConnectionClosed);
        assert_eq!(extract(&closed), None);
        assert_eq!(txretry_core::classify(&closed), Classification::PERMANENT);
    }

    /// SeaORM's own outcomes are the application's business: no code, and a message that
    /// merely mentions a deadlock stays permanent.
    #[test]
    fn seaorm_outcomes_have_no_code() {
        for err in [
            DbErr::RecordNotFound("deadlock report 7".into()),
            DbErr::Custom("customer reports a deadlock".into()),
            DbErr::Exec(RuntimeErr::Internal("no rows".into())),
            DbErr::RecordNotUpdated,
        ] {
            assert_eq!(extract(&err), None, "{err:?}");
            assert_eq!(
                txretry_core::classify(&err),
                Classification::PERMANENT,
                "{err:?}"
            );
        }
    }

    #[test]
    fn sqlx_error_finds_the_driver_error() {
        let err = DbErr::Query(RuntimeErr::SqlxError(Arc::new(sqlx::Error::RowNotFound)));
        assert!(matches!(sqlx_error(&err), Some(sqlx::Error::RowNotFound)));
        assert!(sqlx_error(&DbErr::Conn(RuntimeErr::Internal("x".into()))).is_none());
    }
}
