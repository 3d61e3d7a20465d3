//! The typed code of a tokio-postgres error: the SQLSTATE on its `DbError`, or how the
//! connection broke.

use std::error::Error as StdError;

use tokio_postgres::error::DbError;
use txretry_core::{Code, SqlState};

/// Reads the typed code from one tokio-postgres error value; the default classifier calls it
/// for each link of an error's chain. Use it when you write your own classifier closure.
///
/// Returns `None` for types other than `tokio_postgres::Error` and
/// `tokio_postgres::error::DbError`, and for tokio-postgres errors that carry no code
/// (a parameter that failed to serialize, a row that failed to decode, …).
///
/// ```
/// let err = std::io::Error::other("not a tokio-postgres error");
/// assert_eq!(txretry_tokio_postgres::extract(&err), None);
/// ```
pub fn extract(error: &(dyn StdError + 'static)) -> Option<Code> {
    if let Some(e) = error.downcast_ref::<tokio_postgres::Error>() {
        if let Some(state) = e.code() {
            return SqlState::new(state.code()).map(Code::SqlState);
        }
        if e.is_closed() {
            return Some(Code::Driver("connection closed"));
        }
        // Core's io extractor sees the `std::io::Error` when it is the next link; reading it
        // here too keeps a wrapped `tokio_postgres::Error` (`MyError::Db(e)`) classified at
        // the default depth.
        return e
            .source()
            .and_then(|source| source.downcast_ref::<std::io::Error>())
            .and_then(txretry_core::io_code);
    }
    if let Some(db) = error.downcast_ref::<DbError>() {
        return SqlState::new(db.code().code()).map(Code::SqlState);
    }
    None
}

txretry_core::register_extractor!(extract);

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn other_error_types_have_no_code() {
        assert_eq!(extract(&io::Error::other("deadlock")), None);
        assert_eq!(extract(&std::fmt::Error), None);
    }
}
