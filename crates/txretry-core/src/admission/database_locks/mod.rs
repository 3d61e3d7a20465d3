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
//!
//! `postgres.rs` and `mysql.rs` hold each engine's SQL.

mod mysql;
mod postgres;

use std::time::Duration;

/// The longest wait for a database lock: Postgres' `lock_timeout` is an `int` of
/// milliseconds.
pub(super) const MAX_DATABASE_WAIT: Duration = Duration::from_millis(i32::MAX as u64);

/// How many keys one chain of nested `CASE`s may take in turn (the try-first statement on
/// Postgres, the `GET_LOCK`s on MySQL): more make several chains, one after the other.
const CHAIN_DEPTH: usize = 64;

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
}

/// `("account", 42)` hashed: `0xcec6_cacd_78fe_11c7`, `-3546924672660663865` as a bigint (the
/// tests of both engines' SQL name it).
impl DatabaseLocks<'_> {
    /// Appends the chain that takes the keys in turn and stops at the first refused, as
    /// nested `CASE`s: for each key in order its test, `open(sql, index, key)`, then `held`,
    /// then for each key in reverse its refusal, `close(sql, index, key)`. More than
    /// [`CHAIN_DEPTH`] keys make one chain per group, each `NULL` when all of its keys were
    /// taken, in `COALESCE(<chain>, <chain>, …, held)`: `COALESCE` evaluates an argument
    /// only when those before it were `NULL`, so the groups are taken in order and stop at
    /// the first refusal, and no chain nests deeper than the servers take (one chain of
    /// thousands overran MariaDB's thread stack, and Postgres' parser).
    fn chains(
        &self,
        sql: &mut String,
        held: &str,
        open: impl Fn(&mut String, usize, u64),
        close: impl Fn(&mut String, usize, u64),
    ) {
        let groups = self.keys.chunks(CHAIN_DEPTH);
        let several = groups.len() > 1;
        if several {
            sql.push_str("COALESCE(");
        }
        let mut first = 0;
        for (n, group) in groups.enumerate() {
            if n > 0 {
                sql.push_str(", ");
            }
            for (i, &key) in group.iter().enumerate() {
                open(sql, first + i, key);
            }
            sql.push_str(if several { "NULL" } else { held });
            for (i, &key) in group.iter().enumerate().rev() {
                close(sql, first + i, key);
            }
            first += group.len();
        }
        if several {
            sql.push_str(", ");
            sql.push_str(held);
            sql.push(')');
        }
    }
}

#[cfg(test)]
const ACCOUNT_42: u64 = 0xcec6_cacd_78fe_11c7;

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

    /// The deepest nesting of `CASE` in `sql`.
    fn case_depth(sql: &str) -> usize {
        let (mut depth, mut deepest) = (0_usize, 0);
        for word in sql.split(|c: char| !c.is_ascii_alphanumeric()) {
            match word {
                "CASE" => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                "END" => depth -= 1,
                _ => {}
            }
        }
        deepest
    }

    #[test]
    fn many_keys_make_chains_no_deeper_than_the_servers_take() {
        let keys: Vec<u64> = (1..=150).collect();
        let locks = DatabaseLocks::new(&keys, SECOND);
        for sql in [
            locks.mysql_get_locks(),
            locks.trying_first().postgres_try_begin("BEGIN"),
            locks.postgres_try_in_transaction(),
        ] {
            assert_eq!(case_depth(&sql), CHAIN_DEPTH, "{sql}");
            assert_eq!(sql.matches("COALESCE(").count(), 1, "{sql}");
        }
        // Every key once, in order, across the chains.
        let mysql = locks.mysql_get_locks();
        let named: Vec<usize> = keys
            .iter()
            .map(|&key| {
                let name = DatabaseLocks::mysql_lock_name(key);
                mysql.find(&name).expect("every key is asked for")
            })
            .collect();
        assert!(named.windows(2).all(|w| w[0] < w[1]), "in key order");
        // A refusal in a later chain names its key.
        let (timed_out, interrupted) = DatabaseLocks::mysql_refusal_answers(100);
        assert!(mysql.contains(&format!("WHEN 0 THEN {timed_out} ELSE {interrupted} END")));
        assert_eq!(
            locks.mysql_refused(Some(i64::try_from(timed_out).unwrap())),
            Some((keys[100], Some(0)))
        );
        // Up to CHAIN_DEPTH keys: one chain, as before.
        let few = DatabaseLocks::new(&keys[..CHAIN_DEPTH], SECOND);
        assert!(!few.mysql_get_locks().contains("COALESCE"));
        assert!(!few.postgres_try_in_transaction().contains("COALESCE"));
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
            "SET LOCAL statement_timeout = 0",
            "SELECT set_config('txretry.lock_timeout', current_setting('lock_timeout'), true), \
             set_config('txretry.statement_timeout', current_setting('statement_timeout'), true)",
            "SELECT set_config('lock_timeout', current_setting('txretry.lock_timeout'), true), \
             set_config('statement_timeout', current_setting('txretry.statement_timeout'), true)",
            "/*M! SET STATEMENT max_statement_time = 0 FOR */ ",
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
