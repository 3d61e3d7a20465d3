//! A nested transaction the caller's closure left open: caught before COMMIT.

use std::num::NonZeroU32;

use diesel::result::{Error, QueryResult};

/// The closure returned `Ok` with nested transactions of its own still open: a
/// `conn.transaction(…)` whose future a timeout or `select!` dropped (diesel-async), a
/// savepoint begun by hand. COMMIT would only have released the innermost savepoint,
/// leaving the runner's transaction open and nothing committed. The runner rolls every
/// level back instead and fails the attempt with this error, inside
/// [`diesel::result::Error::QueryBuilderError`]; it is permanent (the closure would leave
/// them open again), and the connection is left out of any transaction.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the transaction's closure returned Ok with {levels} nested transaction(s) still open; \
     nothing was committed (end every nested transaction before returning)"
)]
pub struct NestedTransactionLeftOpen {
    /// Nested transactions open when the closure returned (the runner's own not counted).
    pub levels: u32,
}

impl NestedTransactionLeftOpen {
    /// The error for the transaction `depth` Diesel counts once the closure returned, or
    /// `None` when only the runner's own transaction is open.
    pub(crate) fn at(depth: QueryResult<Option<NonZeroU32>>) -> Option<Error> {
        match depth {
            Ok(Some(depth)) if depth.get() > 1 => Some(Error::QueryBuilderError(Box::new(
                NestedTransactionLeftOpen {
                    levels: depth.get() - 1,
                },
            ))),
            _ => None,
        }
    }
}
