//! Contention-aware admission: transactions that name the key they contend on wait for
//! each other in this process instead of colliding in the database and retrying, and,
//! with [`Admission::in_database`], across processes and hosts through locks on the
//! database itself.
//!
//! Backoff spreads retries out after the collision; admission avoids the collision. With
//! many workers on a few hot rows, the database aborts most concurrent updates of the same
//! row (serialization failures, deadlocks), and every abort wastes a round of work. Letting
//! at most one attempt per key run at a time keeps every distinct key busy, so goodput
//! stays at its peak however many workers there are, and retries almost vanish.
//!
//! The user's side (what to name, what it costs, which locks each database takes and the
//! SQL the runners send) is the `txretry::docs::admission` guide. Here, one job per file:
//!
//! - this file: [`Admission`], its settings, and the wait for an attempt's keys;
//! - `permits`: the keys' queues in this process, and the [`Permit`] an attempt holds;
//! - `collisions`: which keys collided lately ([`note_failure`], [`note_busy`]), for
//!   `only_for_contended_keys` and for Postgres' try-first;
//! - `database_locks/`: the locks of `in_database`; the SQL each engine sends for them in
//!   `postgres.rs` and `mysql.rs`.

mod collisions;
mod database_locks;
mod permits;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use collisions::{BUSY_WINDOW, Collisions};
use database_locks::MAX_DATABASE_WAIT;
use permits::KeyPermits;

pub use collisions::{note_busy, note_failure};
pub use database_locks::{DatabaseLocks, database_locks};
pub use permits::Permit;

/// Admission control for a [`RetryPolicy`](crate::RetryPolicy), set with
/// [`RetryPolicyBuilder::admission`](crate::RetryPolicyBuilder::admission). Clones share
/// their state, so one `Admission` coordinates every task that uses policies built with it.
///
/// Only the async runners admit (the blocking SQLite runner does not need it: `BEGIN
/// IMMEDIATE` already makes SQLite admit one writer at a time), and only transactions
/// that name keys with [`TxOptions::contends_on`](crate::TxOptions::contends_on).
/// [`per_key`](Admission::per_key) coordinates the tasks of one process; several
/// processes still meet in the database unless you add
/// [`in_database`](Admission::in_database), which makes them take turns on the database
/// too.
///
/// A transaction whose future is dropped (a timeout, an aborted task), whether it is
/// waiting for its keys or running, gives back every key it took, and keys nobody holds
/// or waits for are forgotten, so memory stays bounded by the keys in use.
///
/// ```
/// use std::time::Duration;
/// use txretry_core::{Admission, RetryPolicy, TxOptions};
///
/// let policy = RetryPolicy::builder().max_attempts(10).admission(Admission::per_key()).build()?;
/// // Each transaction names the row it updates; two on the same row never overlap.
/// let options = TxOptions::new().contends_on(("account", 42));
///
/// // Several instances of a service: take turns across all of them, on the database.
/// let shared = Admission::per_key().in_database(Duration::from_secs(5));
/// let policy = RetryPolicy::builder().max_attempts(10).admission(shared).build()?;
/// # let _ = (policy, options);
/// # Ok::<(), txretry_core::PolicyError>(())
/// ```
#[derive(Clone, Default)]
pub struct Admission {
    /// The keys in use in this process and their queues.
    permits: KeyPermits,
    /// With [`Admission::in_database`]: how long each database lock may be waited for.
    database: Option<Duration>,
    /// With [`Admission::only_for_contended_keys`]: the keys that collided lately.
    contended: Option<Arc<Collisions>>,
    /// With [`Admission::in_database`]: the keys lately found locked by another session, or
    /// whose attempt collided. Postgres attempts on them wait for their locks at once
    /// instead of trying them first.
    busy: Option<Arc<Collisions>>,
}

impl Admission {
    /// At most one attempt in flight per key. A transaction naming several keys takes them
    /// in a fixed order, so two transactions can never wait for each other in a cycle.
    ///
    /// That holds for transactions that each take all their keys at once. Admission is not
    /// re-entrant: a transaction whose closure runs another transaction naming a key the
    /// outer one holds waits for itself, forever (the in-process queue has no timeout, even
    /// with [`in_database`](Admission::in_database)); and two nested the other way round
    /// can wait for each other. Name every key on the outer transaction instead.
    pub fn per_key() -> Self {
        Admission::default()
    }

    /// Also makes attempts on the same key take turns across processes and hosts: an
    /// admitted attempt takes one lock per named key on the database, and holds them until
    /// its transaction ends.
    ///
    /// Each process still admits attempts with its own queue first, so it sends at most one
    /// waiter per key to the database: N processes with M workers each put at most N
    /// waiters per key on the server. The attempt then takes its keys' locks in the order
    /// of their [`KeyHash`](crate::KeyHash) (as unsigned numbers), the same order in every
    /// process, so two transactions never wait for each other in a cycle.
    ///
    /// `wait` bounds the wait for each lock. A lock not granted in time fails the attempt
    /// with a [`LockTimeout`](crate::TransientKind::LockTimeout) failure, which the policy
    /// retries (or not) like any other lock timeout: no database lock is waited for
    /// forever (the in-process queue before it is, for a nested transaction: see
    /// [`per_key`](Admission::per_key)). A transaction
    /// naming n keys waits at most n × `wait` for its locks. `wait` is capped at
    /// `i32::MAX` milliseconds (about 24.8 days).
    ///
    /// The locks cost something on every transaction that names keys, contended or not,
    /// and pay where several processes collide on the same keys and the database resolves
    /// the collisions slowly or by aborting: measure with `txretry-bench run --processes N`
    /// (BENCHMARKS.md, section 4).
    /// [`only_for_contended_keys`](Admission::only_for_contended_keys) removes the cost
    /// where nothing collides, at a price described there. The `txretry::docs::admission`
    /// guide has the measurements, the lock each database takes, the SQL each runner sends
    /// (on Postgres it tries the locks first and waits only when another session holds
    /// one), and what a cancelled wait leaves on the server.
    ///
    /// # Default
    /// Off: [`per_key`](Admission::per_key) alone coordinates the tasks of this process
    /// only.
    ///
    /// ```
    /// use std::time::Duration;
    /// use txretry_core::{Admission, RetryPolicy};
    ///
    /// let admission = Admission::per_key().in_database(Duration::from_secs(5));
    /// let policy = RetryPolicy::builder().max_attempts(10).admission(admission).build()?;
    /// # let _ = policy;
    /// # Ok::<(), txretry_core::PolicyError>(())
    /// ```
    #[must_use]
    pub fn in_database(mut self, wait: Duration) -> Self {
        self.database = Some(wait.min(MAX_DATABASE_WAIT));
        self.busy = Some(Arc::new(Collisions::new(BUSY_WINDOW)));
        self
    }

    /// The wait for each database lock, when [`in_database`](Admission::in_database) is on.
    #[doc(hidden)]
    pub fn database_wait(&self) -> Option<Duration> {
        self.database
    }

    /// Takes the database locks of [`in_database`](Admission::in_database) only for keys
    /// that collided lately, instead of on every attempt that names keys: a key becomes
    /// *contended* when an attempt naming it fails with a transient error other than a lost
    /// connection (a deadlock, a serialization failure, a lock timeout, `SQLITE_BUSY`),
    /// and stays contended until `window` has passed without another such failure and
    /// without an attempt that had to queue for it in this process (while the locks keep
    /// collisions away, queueing is the sign that the key is still in demand). An attempt
    /// takes the database locks of all its keys when any of them is contended, and none
    /// otherwise; the retry that follows a collision is already locked.
    ///
    /// This trades the guarantee for cost. Without contention no attempt takes a database
    /// lock, so admission costs what [`per_key`](Admission::per_key) costs (nothing on the
    /// database); but until a key has collided in this process, this process's attempts on
    /// it run without its database lock and can meet another process's attempt on it, as
    /// with `per_key` alone. The database still keeps the data right (that is what the
    /// collision is); the first collision per key and window is the price. Use plain
    /// `in_database` when two processes must never run an attempt on one key at once.
    ///
    /// Each process tracks its own keys: it learns of a collision from its own attempts
    /// only. Memory is bounded by the keys that collided within the last `window`.
    ///
    /// # When it pays
    ///
    /// Where collisions are quick to detect and cheap to retry. In the lab (BENCHMARKS.md,
    /// section 4; one shared 2-core machine, so read the spreads there): on MariaDB 10.11
    /// hot rows, 4 processes × 8 workers, it matched the best configuration with no
    /// retries, where plain `in_database` reached 63–67% of it; without contention it took no
    /// database lock at all. It is the wrong choice on Postgres when transactions can
    /// deadlock: Postgres detects a deadlock only after `deadlock_timeout` (1 s by
    /// default), every transaction queued behind the deadlocked ones waits that long, and
    /// each process must meet a collision on each key before it locks it; a random-order
    /// transfer workload that plain `in_database` ran at about 1000 commits/s ran at
    /// 60–200 with this setting in 5 s runs. It learns, slowly: over 60 s runs it averaged
    /// 57–75% of plain `in_database`. There, use `in_database` alone.
    ///
    /// # Default
    /// Off: with `in_database`, every attempt that names keys takes their database locks.
    /// [`RetryPolicyBuilder::build`](crate::RetryPolicyBuilder::build) refuses this setting
    /// without `in_database` ([`PolicyError::ContendedKeysWithoutDatabase`](crate::PolicyError::ContendedKeysWithoutDatabase)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use txretry_core::{Admission, RetryPolicy};
    ///
    /// // Database locks only for keys that collided in the last 10 seconds.
    /// let admission = Admission::per_key()
    ///     .in_database(Duration::from_secs(5))
    ///     .only_for_contended_keys(Duration::from_secs(10));
    /// let policy = RetryPolicy::builder().max_attempts(10).admission(admission).build()?;
    /// # let _ = policy;
    /// # Ok::<(), txretry_core::PolicyError>(())
    /// ```
    #[must_use]
    pub fn only_for_contended_keys(mut self, window: Duration) -> Self {
        self.contended = Some(Arc::new(Collisions::new(window)));
        self
    }

    /// Whether [`only_for_contended_keys`](Admission::only_for_contended_keys) is set
    /// without [`in_database`](Admission::in_database) (a policy refuses it).
    pub(crate) fn contended_without_database(&self) -> bool {
        self.contended.is_some() && self.database.is_none()
    }

    /// Waits until every key is free in this process and holds them until the permit is
    /// dropped (see [`KeyPermits::acquire`]); an attempt that had to queue renews its
    /// keys' collision windows. Cancel-safe, as `acquire` is.
    pub(crate) async fn admit(&self, keys: &[u64]) -> Permit {
        let permit = self.permits.acquire(keys).await;
        if permit.queued() {
            self.renew_after_queueing(keys);
        }
        permit
    }
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Admission");
        debug.field("keys_in_use", &self.permits.in_use());
        if let Some(wait) = &self.database {
            debug.field("in_database", wait);
        }
        if let Some(collisions) = &self.contended {
            debug.field("only_for_contended_keys", &collisions.window);
        }
        debug.finish()
    }
}

/// The wait for admission, when the policy has admission and the transaction named keys;
/// `None` (checked without awaiting anything) otherwise.
#[doc(hidden)]
#[inline]
pub fn admission_for<'a>(
    policy: &'a crate::RetryPolicy,
    options: &'a crate::TxOptions,
) -> Option<impl Future<Output = Permit> + Send + 'a> {
    match policy.admission() {
        Some(admission) if !options.keys().is_empty() => Some(admission.admit(options.keys())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn contended_keys_need_database_locks() {
        let refused = crate::RetryPolicy::builder()
            .admission(Admission::per_key().only_for_contended_keys(SECOND))
            .build()
            .unwrap_err();
        assert_eq!(refused, crate::PolicyError::ContendedKeysWithoutDatabase);
        assert!(
            refused.to_string().contains("needs in_database"),
            "{refused}"
        );
        // In either order.
        crate::RetryPolicy::builder()
            .admission(
                Admission::per_key()
                    .only_for_contended_keys(SECOND)
                    .in_database(SECOND),
            )
            .build()
            .unwrap();
    }

    #[test]
    fn debug_shows_the_database_wait_when_on() {
        assert_eq!(
            format!("{:?}", Admission::per_key()),
            "Admission { keys_in_use: 0 }"
        );
        assert_eq!(
            format!("{:?}", Admission::per_key().in_database(SECOND)),
            "Admission { keys_in_use: 0, in_database: 1s }"
        );
        assert_eq!(
            format!(
                "{:?}",
                Admission::per_key()
                    .in_database(SECOND)
                    .only_for_contended_keys(SECOND)
            ),
            "Admission { keys_in_use: 0, in_database: 1s, only_for_contended_keys: 1s }"
        );
    }
}
