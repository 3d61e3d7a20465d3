//! The SQL a Postgres runner sends for [`DatabaseLocks`]: advisory locks, session-level
//! while it waits, transaction-level once the transaction has begun.

use std::fmt::Write as _;

use super::DatabaseLocks;

impl DatabaseLocks<'_> {
    /// Postgres `lock_timeout` in milliseconds: the wait rounded up, at least 1 (0 would
    /// mean no limit).
    pub(super) fn postgres_timeout_ms(&self) -> u128 {
        self.wait.as_nanos().div_ceil(1_000_000).max(1)
    }

    /// Appends `SELECT <function>(<key>)` for each key, as one statement per key
    /// (`separate`), or as one statement listing them all.
    fn postgres_calls(&self, sql: &mut String, function: &str, separate: bool) {
        for (i, key) in self.keys().enumerate() {
            let lead = match (i, separate) {
                (0, _) | (_, true) => "; SELECT ",
                _ => ", ",
            };
            // The same 64 bits as a signed number, as `KeyHash::to_i64`.
            let _ = write!(sql, "{lead}{function}({})", key as i64);
        }
    }

    /// Postgres, one message: the wait, at session level in a short READ COMMITTED
    /// transaction of its own with `lock_timeout` set for it only (and no
    /// `statement_timeout`: a session's shorter one would cut the wait short, as a
    /// permanent 57014); then `begin`; then the keys move to transaction-level locks, whose
    /// first call takes the transaction's snapshot once the keys are held, and the
    /// session-level ones are let go.
    pub fn postgres_begin(&self, begin: &str) -> String {
        let mut sql = format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '{}ms'; \
             SET LOCAL statement_timeout = 0",
            self.postgres_timeout_ms()
        );
        self.postgres_calls(&mut sql, "pg_advisory_lock", true);
        sql.push_str("; COMMIT; ");
        sql.push_str(begin);
        self.postgres_calls(&mut sql, "pg_advisory_xact_lock", false);
        self.postgres_calls(&mut sql, "pg_advisory_unlock", false);
        sql
    }

    /// Postgres, inside a transaction already begun: the transaction-level locks, with
    /// `lock_timeout` set for them and `statement_timeout` off, and the transaction's
    /// values of both put back afterwards.
    pub fn postgres_in_transaction(&self) -> String {
        let mut sql = format!(
            "SELECT set_config('txretry.lock_timeout', current_setting('lock_timeout'), true), \
             set_config('txretry.statement_timeout', current_setting('statement_timeout'), true); \
             SET LOCAL lock_timeout = '{}ms'; SET LOCAL statement_timeout = 0",
            self.postgres_timeout_ms()
        );
        self.postgres_calls(&mut sql, "pg_advisory_xact_lock", true);
        sql.push_str(
            "; SELECT set_config('lock_timeout', current_setting('txretry.lock_timeout'), true), \
             set_config('statement_timeout', current_setting('txretry.statement_timeout'), true)",
        );
        sql
    }

    /// Appends, for the keys in order, `CASE WHEN pg_try_advisory_xact_lock(<key>) THEN …
    /// ELSE <busy(key)> END`: tries each key's transaction-level lock without waiting and
    /// stops at the first one another session holds (`CASE` evaluates a branch only when
    /// it is taken, and a volatile test is never folded at planning), giving `held` when
    /// every lock was taken. Stopping in key order means a transaction that then waits
    /// holds only keys before the one it waits for, as when it waits from the start.
    /// Past 64 keys, in chains of 64 (see `chains`).
    fn postgres_try_chain(&self, sql: &mut String, held: &str, busy: impl Fn(&mut String, u64)) {
        self.chains(
            sql,
            held,
            |sql, _, key| {
                let _ = write!(
                    sql,
                    "CASE WHEN pg_try_advisory_xact_lock({}) THEN ",
                    key as i64
                );
            },
            |sql, _, key| {
                sql.push_str(" ELSE ");
                busy(sql, key);
                sql.push_str(" END");
            },
        );
    }

    /// Postgres, one message, when no key is busy: `begin`, then one statement that tries
    /// every key's transaction-level lock without waiting. All taken, it answers 0 and the
    /// transaction goes on with its keys held (the statement took its snapshot, which is
    /// fine: nobody held the keys). One taken by another session, it fails with
    /// [`POSTGRES_BUSY_STATE`](Self::POSTGRES_BUSY_STATE) on a text naming the lock (a
    /// cast of that text to `int`: plain SQL has no other way to raise an error, and only
    /// an error reaches a driver that discards BEGIN's rows);
    /// [`postgres_is_busy`](Self::postgres_is_busy) recognizes it, and the runner then
    /// sends [`postgres_begin_after_busy`](Self::postgres_begin_after_busy).
    pub fn postgres_try_begin(&self, begin: &str) -> String {
        let mut sql = format!("{begin}; SELECT CAST(");
        self.postgres_try_chain(&mut sql, "'0'", |sql, key| {
            let _ = write!(
                sql,
                "'{}{} is held by another session'",
                Self::POSTGRES_BUSY_TEXT,
                key as i64
            );
        });
        sql.push_str(" AS int)");
        sql
    }

    /// The SQLSTATE [`postgres_try_begin`](Self::postgres_try_begin) fails with when a key
    /// is locked by another session: `22P02`, invalid text representation.
    const POSTGRES_BUSY_STATE: &'static str = "22P02";

    /// How the text cast by [`postgres_try_begin`](Self::postgres_try_begin) begins; the
    /// server quotes it in its message, translated or not.
    const POSTGRES_BUSY_TEXT: &'static str = "txretry admission: advisory lock ";

    /// Whether a failed [`postgres_try_begin`](Self::postgres_try_begin) (its SQLSTATE and
    /// message) says that a key is locked by another session.
    pub fn postgres_is_busy(code: Option<&str>, message: &str) -> bool {
        code == Some(Self::POSTGRES_BUSY_STATE) && message.contains(Self::POSTGRES_BUSY_TEXT)
    }

    /// Postgres, one message, after [`postgres_try_begin`](Self::postgres_try_begin) found
    /// a key busy: ends the failed transaction (which lets go of the locks it took) and
    /// waits for every key as [`postgres_begin`](Self::postgres_begin) does.
    pub fn postgres_begin_after_busy(&self, begin: &str) -> String {
        format!("ROLLBACK; {}", self.postgres_begin(begin))
    }

    /// Postgres, inside a transaction already begun, when no key is busy: one statement
    /// that tries every key's transaction-level lock without waiting, in order, and
    /// answers `true` when it took them all; `false` means a key is locked by another
    /// session, and the runner then waits with
    /// [`postgres_in_transaction`](Self::postgres_in_transaction) (the keys it took stay
    /// held; they come before the one it waits for).
    pub fn postgres_try_in_transaction(&self) -> String {
        let mut sql = String::from("SELECT ");
        self.postgres_try_chain(&mut sql, "true", |sql, _| sql.push_str("false"));
        sql
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::ACCOUNT_42;
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn postgres_sql_takes_the_keys_before_the_snapshot() {
        assert_eq!(crate::KeyHash::of(("account", 42)).to_u64(), ACCOUNT_42);
        let one = DatabaseLocks::new(&[ACCOUNT_42], Duration::from_millis(250));
        assert_eq!(
            one.postgres_begin("BEGIN ISOLATION LEVEL REPEATABLE READ"),
            "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '250ms'; \
             SET LOCAL statement_timeout = 0; \
             SELECT pg_advisory_lock(-3546924672660663865); COMMIT; \
             BEGIN ISOLATION LEVEL REPEATABLE READ; \
             SELECT pg_advisory_xact_lock(-3546924672660663865); \
             SELECT pg_advisory_unlock(-3546924672660663865)"
        );
        // In the keys' order as unsigned numbers (so 7 before u64::MAX, which is -1).
        let two = DatabaseLocks::new(&[7, u64::MAX], SECOND);
        assert_eq!(
            two.postgres_begin("BEGIN"),
            "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '1000ms'; \
             SET LOCAL statement_timeout = 0; SELECT pg_advisory_lock(7); SELECT pg_advisory_lock(-1); COMMIT; BEGIN; \
             SELECT pg_advisory_xact_lock(7), pg_advisory_xact_lock(-1); \
             SELECT pg_advisory_unlock(7), pg_advisory_unlock(-1)"
        );
        let extremes = DatabaseLocks::new(&[0, 1 << 63], SECOND);
        assert!(extremes.postgres_begin("BEGIN").contains(
            "SELECT pg_advisory_lock(0); SELECT pg_advisory_lock(-9223372036854775808);"
        ));
    }

    #[test]
    fn postgres_sql_inside_a_transaction_restores_its_timeouts() {
        let two = DatabaseLocks::new(&[7, ACCOUNT_42], Duration::from_secs(2));
        assert_eq!(
            two.postgres_in_transaction(),
            "SELECT set_config('txretry.lock_timeout', current_setting('lock_timeout'), true), \
             set_config('txretry.statement_timeout', current_setting('statement_timeout'), true); \
             SET LOCAL lock_timeout = '2000ms'; SET LOCAL statement_timeout = 0; \
             SELECT pg_advisory_xact_lock(7); \
             SELECT pg_advisory_xact_lock(-3546924672660663865); \
             SELECT set_config('lock_timeout', current_setting('txretry.lock_timeout'), true), \
             set_config('statement_timeout', current_setting('txretry.statement_timeout'), true)"
        );
    }

    #[test]
    fn postgres_sql_tries_the_keys_first_in_one_statement() {
        let two = DatabaseLocks::new(&[7, ACCOUNT_42], SECOND).trying_first();
        assert!(two.try_first());
        assert!(!DatabaseLocks::new(&[7], SECOND).try_first());
        assert_eq!(
            two.postgres_try_begin("BEGIN ISOLATION LEVEL REPEATABLE READ"),
            "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT CAST(\
             CASE WHEN pg_try_advisory_xact_lock(7) THEN \
             CASE WHEN pg_try_advisory_xact_lock(-3546924672660663865) THEN '0' \
             ELSE 'txretry admission: advisory lock -3546924672660663865 is held by another session' END \
             ELSE 'txretry admission: advisory lock 7 is held by another session' END AS int)"
        );
        assert_eq!(
            two.postgres_begin_after_busy("BEGIN"),
            format!("ROLLBACK; {}", two.postgres_begin("BEGIN"))
        );
        assert_eq!(
            two.postgres_try_in_transaction(),
            "SELECT CASE WHEN pg_try_advisory_xact_lock(7) THEN \
             CASE WHEN pg_try_advisory_xact_lock(-3546924672660663865) THEN true \
             ELSE false END ELSE false END"
        );
        // The failure as the server reports it (message text from a real run), in English
        // or not; other errors are not it.
        let busy = |code, message| DatabaseLocks::postgres_is_busy(code, message);
        assert!(busy(
            Some("22P02"),
            "invalid input syntax for type integer: \"txretry admission: advisory lock \
             8032121567702361407 is held by another session\""
        ));
        assert!(busy(
            Some("22P02"),
            "ungültige Eingabesyntax für Typ integer: »txretry admission: advisory lock 7 is \
             held by another session«"
        ));
        assert!(!busy(
            Some("22P02"),
            "invalid input syntax for type integer: \"x\""
        ));
        assert!(!busy(
            Some("55P03"),
            "txretry admission: advisory lock 7 is held by another session"
        ));
        assert!(!busy(None, "txretry admission: advisory lock 7"));
    }
}
