//! The error a MySQL / MariaDB runner returns when database-backed admission
//! ([`Admission::in_database`](txretry_core::Admission::in_database)) cannot take a key's
//! named lock.

use txretry_core::__private::DatabaseLocks;

/// A named lock that database-backed admission could not take on MySQL / MariaDB:
/// `GET_LOCK` returned 0 (not granted within the wait) or NULL (the wait was interrupted,
/// e.g. by `KILL QUERY`).
///
/// The runner returns it as [`sqlx::Error::Database`], with the error number a statement
/// would have failed with: 1205 (lock-wait timeout, SQLSTATE `HY000`; transient, retried
/// by the default policy) when the lock was not granted in time, 1317 (query interrupted,
/// SQLSTATE `70100`; permanent) when the wait was interrupted. [`error_code`](crate::error_code)
/// and the default classifier read it as [`Code::MySql`](txretry_core::Code::MySql) with
/// that number. Its message starts with `txretry admission:` and names the lock.
///
/// ```
/// # fn check(err: &sqlx::Error) {
/// use txretry_sqlx::LockNotGranted;
///
/// if let Some(refused) = err
///     .as_database_error()
///     .and_then(|db| db.try_downcast_ref::<LockNotGranted>())
/// {
///     eprintln!("{} ({}) not granted in time: {}", refused.lock_name(), refused.number(), refused.timed_out());
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockNotGranted {
    name: String,
    number: u16,
    state: &'static str,
    message: String,
}

impl LockNotGranted {
    /// `GET_LOCK` for `key` answered `result` (0 or NULL) instead of 1.
    pub(crate) fn new(locks: &DatabaseLocks<'_>, key: u64, result: Option<i64>) -> Self {
        let (number, state, message) = locks.mysql_refusal(key, result);
        LockNotGranted {
            name: DatabaseLocks::mysql_lock_name(key),
            number,
            state,
            message,
        }
    }

    /// The named lock, `txretry:` and 16 hex digits of the key's
    /// [`KeyHash`](txretry_core::KeyHash).
    pub fn lock_name(&self) -> &str {
        &self.name
    }

    /// The MySQL error number: 1205 (not granted in time) or 1317 (interrupted).
    pub fn number(&self) -> u16 {
        self.number
    }

    /// Whether the lock was not granted within the wait (rather than interrupted).
    pub fn timed_out(&self) -> bool {
        self.number == 1205
    }
}

// The SQLSTATE that goes with the number: `HY000` for 1205, `70100` for 1317.
crate::own_error::database_error!(LockNotGranted, |this| message: &this.message, code: this.state);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use txretry_core::{Code, TransientKind, Verdict};

    use super::*;

    fn refused(result: Option<i64>) -> sqlx::Error {
        let keys = [0xcec6_cacd_78fe_11c7];
        let locks = DatabaseLocks::new(&keys, Duration::from_secs(2));
        sqlx::Error::Database(Box::new(LockNotGranted::new(&locks, keys[0], result)))
    }

    #[test]
    fn not_granted_in_time_is_a_lock_timeout() {
        let err = refused(Some(0));
        assert_eq!(crate::extract(&err), Some(Code::MySql(1205)));
        let link = std::error::Error::source(&err).expect("Database has a source");
        assert_eq!(crate::extract(link), Some(Code::MySql(1205)));
        let c = txretry_core::classify(&err);
        assert_eq!(c.verdict, Verdict::Transient(TransientKind::LockTimeout));
        assert_eq!(c.code, Some(Code::MySql(1205)));
        let db = err.as_database_error().expect("a database error");
        assert_eq!(db.code().as_deref(), Some("HY000"));
        let lock = db.try_downcast_ref::<LockNotGranted>().expect("ours");
        assert_eq!(lock.lock_name(), "txretry:cec6cacd78fe11c7");
        assert!(lock.timed_out());
        assert_eq!(
            err.to_string(),
            "error returned from database: txretry admission: named lock \
             'txretry:cec6cacd78fe11c7' not granted within 2 s (GET_LOCK returned 0)"
        );
    }

    #[test]
    fn an_interrupted_wait_is_permanent() {
        let err = refused(None);
        assert_eq!(crate::extract(&err), Some(Code::MySql(1317)));
        let c = txretry_core::classify(&err);
        assert_eq!(c.verdict, Verdict::Permanent);
        assert_eq!(c.code, Some(Code::MySql(1317)));
        let db = err.as_database_error().expect("a database error");
        assert_eq!(db.code().as_deref(), Some("70100"));
        assert!(!db.try_downcast_ref::<LockNotGranted>().unwrap().timed_out());
    }
}
