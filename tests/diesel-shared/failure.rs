//! What a closure saw of a Diesel error, for the shared scenarios of `tests/shared/locks.rs`:
//! written once for Diesel and diesel-async (a `#[path]` module of their binaries). Diesel
//! keeps the SQLSTATE and the message, never a MySQL error's number.

use diesel::result::Error;

use crate::locks::Failure;

pub fn failure(err: &Error, in_tx: Option<i64>) -> Failure {
    let info = match err {
        Error::DatabaseError(_, info) => Some(info),
        _ => None,
    };
    Failure {
        sqlstate: info
            .and_then(|info| info.sqlstate())
            .map(|state| state.as_str().to_owned()),
        errno: None,
        message: info.map_or_else(|| err.to_string(), |info| info.message().to_owned()),
        classified: txretry::classify(err),
        in_tx,
    }
}
