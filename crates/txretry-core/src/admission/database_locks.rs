//! The other half of [`Admission::in_database`](crate::Admission::in_database): the locks
//! an admitted attempt takes on the database, so that attempts on the same key take turns
//! across processes and hosts too.
//!
//! [`database_locks`] says whether an attempt takes them (and whether Postgres tries them
//! first); [`DatabaseLocks`] builds the SQL each engine sends for them: Postgres advisory
//! locks on [`KeyHash::to_i64`](crate::KeyHash::to_i64), MySQL / MariaDB `GET_LOCK` named
//! after [`KeyHash::to_u64`](crate::KeyHash::to_u64). Only numbers computed here go into
//! that SQL, never the keys themselves. The runners of the adapter crates send it; the
//! `txretry::docs::admission` guide shows what they send and when.

use std::fmt::Write as _;
use std::time::Duration;

/// The longest wait for a database lock: Postgres' `lock_timeout` is an `int` of
/// milliseconds.
pub(super) const MAX_DATABASE_WAIT: Duration = Duration::from_millis(i32::MAX as u64);

/// The database locks one attempt takes under
/// [`Admission::in_database`](crate::Admission::in_database): the named keys
/// (hashed, sorted) and the wait for each, with the SQL each engine sends for them.
/// Everything spliced into that SQL is a number computed here.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatabaseLocks<'a> {
    keys: &'a [u64],
    wait: Duration,
    /// Postgres: try the locks without waiting first, and wait only if one is taken.
    try_first: bool,
}

/// The database locks for an attempt, when the policy's admission is
/// [`in_database`](crate::Admission::in_database), the transaction named keys, and (under
/// [`only_for_contended_keys`](crate::Admission::only_for_contended_keys)) one of them is
/// contended. Runners ask before every attempt.
#[doc(hidden)]
#[inline]
pub fn database_locks<'a>(
    policy: &'a crate::RetryPolicy,
    options: &'a crate::TxOptions,
) -> Option<DatabaseLocks<'a>> {
    let admission = policy.admission()?;
    let wait = admission.database_wait()?;
    let keys = options.keys();
    if keys.is_empty() || !admission.locks_in_database(keys) {
        return None;
    }
    let try_first = !admission.any_busy(keys);
    Some(DatabaseLocks {
        keys,
        wait,
        try_first,
    })
}

impl<'a> DatabaseLocks<'a> {
    /// Cleans up after a Postgres BEGIN that took locks and failed: ends the failed
    /// transaction, and drops the session-level locks the wait may have taken.
    pub const POSTGRES_CLEANUP: &'static str = "ROLLBACK; SELECT pg_advisory_unlock_all()";

    /// Releases a MySQL / MariaDB session's named locks.
    pub const MYSQL_RELEASE: &'static str = "DO RELEASE_ALL_LOCKS()";

    /// Locks on `keys` (sorted, without repeats: the order they are taken in), for tests;
    /// runners get theirs from [`database_locks`].
    pub fn new(keys: &'a [u64], wait: Duration) -> Self {
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        DatabaseLocks {
            keys,
            wait,
            try_first: false,
        }
    }

    /// The same locks, tried first (as [`database_locks`] gives them for keys that are not
    /// busy), for tests.
    #[cfg(test)]
    fn trying_first(self) -> Self {
        DatabaseLocks {
            try_first: true,
            ..self
        }
    }

    /// Whether a Postgres runner tries the locks without waiting first
    /// ([`postgres_try_begin`](Self::postgres_try_begin),
    /// [`postgres_try_in_transaction`](Self::postgres_try_in_transaction)) and waits for
    /// them only when one is taken. False when one of the keys is busy: found locked by
    /// another session, or its attempt collided, within the last second.
    pub fn try_first(&self) -> bool {
        self.try_first
    }

    /// The keys' hashes, in the order their locks are taken.
    pub fn keys(&self) -> impl Iterator<Item = u64> + 'a {
        self.keys.iter().copied()
    }

    /// The wait for each lock.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Postgres `lock_timeout` in milliseconds: the wait rounded up, at least 1 (0 would
    /// mean no limit).
    fn postgres_timeout_ms(&self) -> u128 {
        self.wait.as_nanos().div_ceil(1_000_000).max(1)
    }

    /// `GET_LOCK`'s timeout: whole seconds (MySQL reads it as an integer), rounded up.
    fn mysql_timeout_secs(&self) -> u64 {
        self.wait.as_secs() + u64::from(self.wait.subsec_nanos() > 0)
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
    /// transaction of its own with `lock_timeout` set for it only; then `begin`; then the
    /// keys move to transaction-level locks, whose first call takes the transaction's
    /// snapshot once the keys are held, and the session-level ones are let go.
    pub fn postgres_begin(&self, begin: &str) -> String {
        let mut sql = format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '{}ms'",
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
    /// `lock_timeout` set for them and the session's value put back afterwards.
    pub fn postgres_in_transaction(&self) -> String {
        let mut sql = format!(
            "SELECT set_config('txretry.lock_timeout', current_setting('lock_timeout'), true); \
             SET LOCAL lock_timeout = '{}ms'",
            self.postgres_timeout_ms()
        );
        self.postgres_calls(&mut sql, "pg_advisory_xact_lock", true);
        sql.push_str(
            "; SELECT set_config('lock_timeout', current_setting('txretry.lock_timeout'), true)",
        );
        sql
    }

    /// Appends, for the keys in order, `CASE WHEN pg_try_advisory_xact_lock(<key>) THEN …
    /// ELSE <busy(key)> END`: tries each key's transaction-level lock without waiting and
    /// stops at the first one another session holds (`CASE` evaluates a branch only when
    /// it is taken, and a volatile test is never folded at planning), giving `held` when
    /// every lock was taken. Stopping in key order means a transaction that then waits
    /// holds only keys before the one it waits for, as when it waits from the start.
    fn postgres_try_chain(&self, sql: &mut String, held: &str, busy: impl Fn(&mut String, u64)) {
        for key in self.keys() {
            let _ = write!(
                sql,
                "CASE WHEN pg_try_advisory_xact_lock({}) THEN ",
                key as i64
            );
        }
        sql.push_str(held);
        for key in self.keys.iter().rev() {
            sql.push_str(" ELSE ");
            busy(sql, *key);
            sql.push_str(" END");
        }
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
    /// number of keys.
    pub fn mysql_get_locks(&self) -> String {
        let seconds = self.mysql_timeout_secs();
        let mut sql = String::from("SELECT ");
        for key in self.keys() {
            let _ = write!(
                sql,
                "CASE GET_LOCK('{}', {seconds}) WHEN 1 THEN ",
                Self::mysql_lock_name(key)
            );
        }
        sql.push('0');
        for i in (0..self.keys.len()).rev() {
            let (timed_out, interrupted) = Self::mysql_refusal_answers(i);
            let _ = write!(sql, " WHEN 0 THEN {timed_out} ELSE {interrupted} END");
        }
        sql
    }

    /// What [`mysql_get_locks`](Self::mysql_get_locks) answers when the key at `index`
    /// was refused: GET_LOCK returned 0, or NULL.
    fn mysql_refusal_answers(index: usize) -> (u64, u64) {
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
    use super::*;
    use crate::Admission;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn database_locks_need_in_database_and_keys() {
        let keyed = crate::TxOptions::new().contends_on(2).contends_on(1);
        let plain = crate::TxOptions::new();
        let policy = |admission: Option<Admission>| {
            let builder = crate::RetryPolicy::builder();
            match admission {
                Some(admission) => builder.admission(admission),
                None => builder,
            }
            .build()
            .unwrap()
        };
        let none = policy(None);
        let local = policy(Some(Admission::per_key()));
        let shared = policy(Some(Admission::per_key().in_database(SECOND)));
        assert_eq!(database_locks(&none, &keyed), None);
        assert_eq!(database_locks(&local, &keyed), None);
        assert_eq!(database_locks(&shared, &plain), None);
        let locks = database_locks(&shared, &keyed).expect("locks");
        assert_eq!(locks.wait(), SECOND);
        let mut sorted = [
            crate::KeyHash::of(1).to_u64(),
            crate::KeyHash::of(2).to_u64(),
        ];
        sorted.sort_unstable();
        assert_eq!(locks.keys().collect::<Vec<_>>(), sorted);
    }

    #[test]
    fn the_database_wait_is_capped() {
        let admission = Admission::per_key().in_database(Duration::MAX);
        assert_eq!(admission.database_wait(), Some(MAX_DATABASE_WAIT));
        assert_eq!(Admission::per_key().database_wait(), None);
        let locks = DatabaseLocks::new(&[1], MAX_DATABASE_WAIT);
        assert_eq!(locks.postgres_timeout_ms(), i32::MAX as u128);
    }

    #[test]
    fn waits_round_up_to_what_each_engine_takes() {
        let ms = |wait: Duration| DatabaseLocks::new(&[1], wait).postgres_timeout_ms();
        let secs = |wait: Duration| DatabaseLocks::new(&[1], wait).mysql_timeout_secs();
        // lock_timeout = 0 would mean no limit.
        assert_eq!(ms(Duration::ZERO), 1);
        assert_eq!(ms(Duration::from_micros(1)), 1);
        assert_eq!(ms(Duration::from_micros(1_500)), 2);
        assert_eq!(ms(Duration::from_secs(5)), 5_000);
        // GET_LOCK(name, 0) tries once; MySQL reads the timeout as whole seconds.
        assert_eq!(secs(Duration::ZERO), 0);
        assert_eq!(secs(Duration::from_millis(1)), 1);
        assert_eq!(secs(Duration::from_secs(1)), 1);
        assert_eq!(secs(Duration::from_millis(1_200)), 2);
    }

    /// `("account", 42)`: `0xcec6_cacd_78fe_11c7`, `-3546924672660663865` as a bigint.
    const ACCOUNT_42: u64 = 0xcec6_cacd_78fe_11c7;

    #[test]
    fn postgres_sql_takes_the_keys_before_the_snapshot() {
        assert_eq!(crate::KeyHash::of(("account", 42)).to_u64(), ACCOUNT_42);
        let one = DatabaseLocks::new(&[ACCOUNT_42], Duration::from_millis(250));
        assert_eq!(
            one.postgres_begin("BEGIN ISOLATION LEVEL REPEATABLE READ"),
            "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '250ms'; \
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
             SELECT pg_advisory_lock(7); SELECT pg_advisory_lock(-1); COMMIT; BEGIN; \
             SELECT pg_advisory_xact_lock(7), pg_advisory_xact_lock(-1); \
             SELECT pg_advisory_unlock(7), pg_advisory_unlock(-1)"
        );
        let extremes = DatabaseLocks::new(&[0, 1 << 63], SECOND);
        assert!(extremes.postgres_begin("BEGIN").contains(
            "SELECT pg_advisory_lock(0); SELECT pg_advisory_lock(-9223372036854775808);"
        ));
    }

    #[test]
    fn postgres_sql_inside_a_transaction_restores_lock_timeout() {
        let two = DatabaseLocks::new(&[7, ACCOUNT_42], Duration::from_secs(2));
        assert_eq!(
            two.postgres_in_transaction(),
            "SELECT set_config('txretry.lock_timeout', current_setting('lock_timeout'), true); \
             SET LOCAL lock_timeout = '2000ms'; \
             SELECT pg_advisory_xact_lock(7); \
             SELECT pg_advisory_xact_lock(-3546924672660663865); \
             SELECT set_config('lock_timeout', current_setting('txretry.lock_timeout'), true)"
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
            "SELECT CASE GET_LOCK('txretry:0000000000000007', 3) WHEN 1 THEN \
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

    /// Whatever the keys, the SQL holds only fixed text and numbers.
    #[test]
    fn only_numbers_are_spliced_into_the_sql() {
        let keys: Vec<u64> = [
            crate::KeyHash::of("'; DROP TABLE t; --"),
            crate::KeyHash::of(("tenant", "o'brien")),
            crate::KeyHash::of(u128::MAX),
        ]
        .map(crate::KeyHash::to_u64)
        .into_iter()
        .collect();
        let mut keys = keys;
        keys.sort_unstable();
        let locks = DatabaseLocks::new(&keys, SECOND);
        let mut texts = vec![
            locks.postgres_begin_after_busy("BEGIN"),
            locks.postgres_in_transaction(),
            locks.trying_first().postgres_try_begin("BEGIN"),
            locks.postgres_try_in_transaction(),
        ];
        texts.push(locks.mysql_get_locks());
        let fixed = [
            "BEGIN ISOLATION LEVEL READ COMMITTED",
            "SET LOCAL lock_timeout = '1000ms'",
            "SELECT pg_advisory_lock(",
            "SELECT pg_advisory_xact_lock(",
            "SELECT pg_advisory_unlock(",
            "pg_advisory_xact_lock(",
            "pg_advisory_unlock(",
            "SELECT set_config('txretry.lock_timeout', current_setting('lock_timeout'), true)",
            "SELECT set_config('lock_timeout', current_setting('txretry.lock_timeout'), true)",
            "ROLLBACK",
            "SELECT CAST(",
            "CASE WHEN pg_try_advisory_xact_lock(",
            ") THEN ",
            "'txretry admission: advisory lock ",
            " is held by another session'",
            " AS int)",
            "'0'",
            "true",
            "false",
            "SELECT ",
            "CASE GET_LOCK('txretry:",
            " WHEN 1 THEN ",
            " WHEN 0 THEN ",
            " ELSE ",
            " END",
            "COMMIT",
            "BEGIN",
        ];
        for text in texts {
            let mut rest = text.clone();
            for f in fixed {
                rest = rest.replace(f, "");
            }
            assert!(
                rest.chars()
                    .all(|c| c.is_ascii_hexdigit() || "-;,)' ".contains(c)),
                "{text}: left {rest:?}"
            );
        }
    }
}
