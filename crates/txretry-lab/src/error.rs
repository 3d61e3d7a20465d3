//! What a lab transaction can fail with: a database error, or a business refusal.

use std::error::Error;
use std::fmt;

/// The error type of every lab transaction.
///
/// `source()` returns the sqlx error itself, so txretry's classifier (which looks at the
/// error and one level of `source()`) finds the driver's code behind the wrapper.
#[derive(Debug)]
pub enum TxError {
    /// The database said no.
    Db(sqlx::Error),
    /// The payer's balance was below the amount: a real outcome, never retried.
    InsufficientFunds {
        /// The paying account.
        account: i64,
        /// What it had when the transfer looked.
        balance: i64,
        /// What the transfer wanted to move.
        amount: i64,
    },
}

impl fmt::Display for TxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxError::Db(e) => write!(f, "database error: {}", describe(e)),
            TxError::InsufficientFunds {
                account,
                balance,
                amount,
            } => {
                write!(
                    f,
                    "insufficient funds: account {account} holds {balance}, transfer needs {amount}"
                )
            }
        }
    }
}

/// A driver error as the lab prints it: a database's own message and code, without what
/// sqlx's Postgres `Display` appends (`at line 948`: a line of the server's C source, noise
/// to whoever reads the lab's output).
pub fn describe(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(db) => match db.code() {
            Some(code) => format!("{} (code {code})", db.message()),
            None => db.message().to_owned(),
        },
        other => other.to_string(),
    }
}

impl Error for TxError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            TxError::Db(e) => Some(e),
            TxError::InsufficientFunds { .. } => None,
        }
    }
}

impl From<sqlx::Error> for TxError {
    fn from(e: sqlx::Error) -> Self {
        TxError::Db(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use txretry::Verdict;

    #[test]
    fn a_business_refusal_is_permanent() {
        let e = TxError::InsufficientFunds {
            account: 1,
            balance: 5,
            amount: 10,
        };
        assert_eq!(txretry::classify(&e).verdict, Verdict::Permanent);
    }

    #[test]
    fn the_driver_error_is_reachable_through_source() {
        let e = TxError::from(sqlx::Error::RowNotFound);
        assert!(e.source().is_some_and(|s| s.is::<sqlx::Error>()));
    }
}
