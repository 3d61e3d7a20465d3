//! The SQL a MySQL / MariaDB runner sends for [`DatabaseLocks`]: named locks
//! (`GET_LOCK`), taken in one statement, and what a refusal is reported as.

use std::fmt::Write as _;

use super::DatabaseLocks;

impl DatabaseLocks<'_> {
    /// `GET_LOCK`'s timeout: whole seconds (MySQL reads it as an integer), rounded up.
    pub(super) fn mysql_timeout_secs(&self) -> u64 {
        self.wait.as_secs() + u64::from(self.wait.subsec_nanos() > 0)
    }

    /// The MySQL / MariaDB named lock of a key: `txretry:` and the hash's 16 lowercase
    /// hex digits (24 characters; MySQL allows 64).
    pub fn mysql_lock_name(key: u64) -> String {
        format!("txretry:{key:016x}")
    }

    /// What a runner reports when `GET_LOCK` for `key` answered `result` instead of 1:
    /// the server error a statement would have failed with (errno, SQLSTATE, message).
    /// 0 means the lock was not granted within the wait: 1205, as a lock-wait timeout;
    /// NULL that the wait was interrupted (`KILL QUERY`) or failed: 1317, as an
    /// interrupted statement.
    pub fn mysql_refusal(&self, key: u64, result: Option<i64>) -> (u16, &'static str, String) {
        let name = Self::mysql_lock_name(key);
        match result {
            Some(answer) => (
                1205,
                "HY000",
                format!(
                    "txretry admission: named lock '{name}' not granted within {} s \
                     (GET_LOCK returned {answer})",
                    self.mysql_timeout_secs()
                ),
            ),
            None => (
                1317,
                "70100",
                format!(
                    "txretry admission: the wait for named lock '{name}' was interrupted \
                     (GET_LOCK returned NULL)"
                ),
            ),
        }
    }

    /// One statement that takes every key's named lock in order and stops at the first
    /// one not granted, for two keys `SELECT CASE GET_LOCK(<first>, <seconds>) WHEN 1
    /// THEN CASE GET_LOCK(<second>, <seconds>) WHEN 1 THEN 0 WHEN 0 THEN 4 ELSE 5 END
    /// WHEN 0 THEN 2 ELSE 3 END` (`CASE` evaluates a branch only when it is taken, so a
    /// refused key's successors are never asked for). It answers 0 when
    /// every lock was granted; otherwise [`mysql_refused`](Self::mysql_refused) says which
    /// key was refused and what `GET_LOCK` returned for it. One round trip, whatever the
    /// number of keys (past 64, in chains of 64: see `chains`).
    ///
    /// On MariaDB it runs with no `max_statement_time` (a comment only MariaDB executes sets
    /// it for this statement): a session's shorter one would cut the wait short, GET_LOCK
    /// answering NULL.
    pub fn mysql_get_locks(&self) -> String {
        let seconds = self.mysql_timeout_secs();
        let mut sql = String::from("/*M! SET STATEMENT max_statement_time = 0 FOR */ SELECT ");
        self.chains(
            &mut sql,
            "0",
            |sql, _, key| {
                let name = Self::mysql_lock_name(key);
                let _ = write!(sql, "CASE GET_LOCK('{name}', {seconds}) WHEN 1 THEN ");
            },
            |sql, i, _| {
                let (timed_out, interrupted) = Self::mysql_refusal_answers(i);
                let _ = write!(sql, " WHEN 0 THEN {timed_out} ELSE {interrupted} END");
            },
        );
        sql
    }

    /// What [`mysql_get_locks`](Self::mysql_get_locks) answers when the key at `index`
    /// was refused: GET_LOCK returned 0, or NULL.
    pub(super) fn mysql_refusal_answers(index: usize) -> (u64, u64) {
        let base = 2 * (index as u64 + 1);
        (base, base + 1)
    }

    /// Reads the answer of [`mysql_get_locks`](Self::mysql_get_locks): `None` when every
    /// lock was granted, else the key refused and `GET_LOCK`'s result for it (`Some(0)`
    /// timed out, `None` interrupted), ready for [`mysql_refusal`](Self::mysql_refusal).
    /// An answer the statement cannot give (NULL, or out of range) is read as the first
    /// key interrupted: the locks are then in an unknown state, which the runners treat as
    /// held until released.
    pub fn mysql_refused(&self, answer: Option<i64>) -> Option<(u64, Option<i64>)> {
        let first = self.keys.first().copied()?;
        let Some(answer) = answer.and_then(|a| u64::try_from(a).ok()) else {
            return Some((first, None));
        };
        if answer == 0 {
            return None;
        }
        let refused = self.keys().enumerate().find_map(|(i, key)| {
            let (timed_out, interrupted) = Self::mysql_refusal_answers(i);
            (answer == timed_out || answer == interrupted)
                .then_some((key, (answer == timed_out).then_some(0)))
        });
        Some(refused.unwrap_or((first, None)))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::ACCOUNT_42;
    use super::*;

    #[test]
    fn mysql_sql_names_the_lock_by_the_hash() {
        assert_eq!(
            DatabaseLocks::mysql_lock_name(ACCOUNT_42),
            "txretry:cec6cacd78fe11c7"
        );
        assert_eq!(
            DatabaseLocks::mysql_lock_name(7),
            "txretry:0000000000000007"
        );
        let locks = DatabaseLocks::new(&[7, ACCOUNT_42], Duration::from_millis(2_500));
        assert_eq!(
            locks.mysql_get_locks(),
            "/*M! SET STATEMENT max_statement_time = 0 FOR */ SELECT \
             CASE GET_LOCK('txretry:0000000000000007', 3) WHEN 1 THEN \
             CASE GET_LOCK('txretry:cec6cacd78fe11c7', 3) WHEN 1 THEN 0 \
             WHEN 0 THEN 4 ELSE 5 END WHEN 0 THEN 2 ELSE 3 END"
        );
        // Every answer the statement can give, and some it cannot.
        assert_eq!(locks.mysql_refused(Some(0)), None);
        assert_eq!(locks.mysql_refused(Some(2)), Some((7, Some(0))));
        assert_eq!(locks.mysql_refused(Some(3)), Some((7, None)));
        assert_eq!(locks.mysql_refused(Some(4)), Some((ACCOUNT_42, Some(0))));
        assert_eq!(locks.mysql_refused(Some(5)), Some((ACCOUNT_42, None)));
        for impossible in [None, Some(1), Some(6), Some(-1), Some(i64::MAX)] {
            assert_eq!(
                locks.mysql_refused(impossible),
                Some((7, None)),
                "{impossible:?}"
            );
        }
        assert_eq!(DatabaseLocks::MYSQL_RELEASE, "DO RELEASE_ALL_LOCKS()");
        assert_eq!(
            locks.mysql_refusal(7, Some(0)),
            (
                1205,
                "HY000",
                "txretry admission: named lock 'txretry:0000000000000007' not granted within \
                 3 s (GET_LOCK returned 0)"
                    .into()
            )
        );
        let (errno, state, message) = locks.mysql_refusal(7, None);
        assert_eq!((errno, state), (1317, "70100"));
        assert!(message.starts_with("txretry admission: "), "{message}");
        assert!(message.contains("'txretry:0000000000000007'"), "{message}");
        // What the default table makes of them: retried, and not.
        use crate::{Code, TransientKind, Verdict, default_verdict};
        assert_eq!(
            default_verdict(Code::MySql(1205)),
            Some(Verdict::Transient(TransientKind::LockTimeout))
        );
        assert_eq!(default_verdict(Code::MySql(1317)), None);
    }
}
