//! What a lab transaction can fail with: a database error, or a business refusal.

/// The error type of every lab transaction.
///
/// `source()` returns the sqlx error itself, so txretry's classifier (which looks at the
/// error and one level of `source()`) finds the driver's code behind the wrapper.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    /// The database said no.
    #[error("database error: {}", describe(.0))]
    Db(#[from] sqlx::Error),
    /// The payer's balance was below the amount: a real outcome, never retried.
    #[error("insufficient funds: account {account} holds {balance}, transfer needs {amount}")]
    InsufficientFunds {
        /// The paying account.
        account: i64,
        /// What it had when the transfer looked.
        balance: i64,
        /// What the transfer wanted to move.
        amount: i64,
    },
}

/// A driver error as the lab prints it: a database's own message and code, without the
/// `at line 948` sqlx's Postgres `Display` appends (txretry-sqlx's, shared with
/// `PrimaryPool`'s reasons).
pub use txretry::sqlx::describe::describe;
