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

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::Verdict;

/// Each key in use and its lock: a semaphore with one permit. An entry lives while anyone
/// holds or waits for the key; [`Permit`] removes it when the last one lets go.
type Locks = HashMap<u64, Arc<Semaphore>>;

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
    keys: Arc<Mutex<Locks>>,
    /// With [`Admission::in_database`]: how long each database lock may be waited for.
    database: Option<Duration>,
    /// With [`Admission::only_for_contended_keys`]: the keys that collided lately.
    contended: Option<Arc<Collisions>>,
    /// With [`Admission::in_database`]: the keys lately found locked by another session, or
    /// whose attempt collided. Postgres attempts on them wait for their locks at once
    /// instead of trying them first.
    busy: Option<Arc<Collisions>>,
}

/// When each key last collided (for [`Admission::only_for_contended_keys`]) or was found
/// busy (for [`Admission::in_database`] on Postgres). Shared by the clones of one
/// `Admission`.
struct Collisions {
    /// How long a key stays marked after its last collision (or renewal).
    window: Duration,
    recent: Mutex<RecentCollisions>,
}

struct RecentCollisions {
    last: HashMap<u64, Instant>,
    /// Past this many entries, the next collision forgets the keys whose window is over
    /// (then this becomes twice what is left, so forgetting costs O(1) per collision
    /// amortized, and memory stays bounded by the keys that collided within a window).
    forget_above: usize,
}

/// The fewest entries [`RecentCollisions`] keeps before it forgets old ones.
const KEEP_COLLISIONS: usize = 64;

/// How long a key found locked by another session (or whose attempt collided) has its
/// Postgres locks waited for at once, without trying them first, counted from the last
/// such finding or the last attempt that queued for the key in this process: a key in
/// steady demand keeps being waited for, and one no longer in demand soon costs only the
/// try again.
const BUSY_WINDOW: Duration = Duration::from_secs(1);

/// The longest wait for a database lock: Postgres' `lock_timeout` is an `int` of
/// milliseconds.
const MAX_DATABASE_WAIT: Duration = Duration::from_millis(i32::MAX as u64);

impl Admission {
    /// At most one attempt in flight per key. A transaction naming several keys takes them
    /// in a fixed order, so two transactions can never wait for each other in a cycle.
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
    /// retries (or not) like any other lock timeout; nothing waits forever. A transaction
    /// naming n keys waits at most n × `wait` for its locks. `wait` is capped at
    /// `i32::MAX` milliseconds (about 24.8 days).
    ///
    /// # Default
    /// Off: [`per_key`](Admission::per_key) alone coordinates the tasks of this process
    /// only.
    ///
    /// # What it costs, and when it pays
    ///
    /// The locks are extra work on every transaction that names keys, contended or not:
    /// on Postgres one statement in BEGIN's round trip (`txretry::sqlx`) or one more
    /// round trip (`txretry::tokio_postgres`), and a lock in the server's lock table; on
    /// MySQL and MariaDB one round trip to take the locks and one to release them.
    /// Measured with the lab (BENCHMARKS.md, section 4; one 2-core machine, 4 processes ×
    /// 8 workers, so read the spreads there): on Postgres it kept retries at zero and
    /// turned a random-order transfer workload that collapses on `deadlock_timeout` into
    /// one of the best configurations measured; on MariaDB 10.11, where InnoDB detects
    /// deadlocks at once, per-process admission alone did better in the same workloads.
    /// Without contention, on single-row transactions, it cost 17% of goodput on Postgres
    /// (pgbench, running the same statements without txretry, puts the advisory lock alone
    /// at 10%) and 25% on MariaDB (two more round trips). Turn it on where several
    /// processes collide on the same keys and the database resolves the collisions slowly
    /// or by aborting, and measure with `txretry-lab --processes N`.
    /// [`only_for_contended_keys`](Admission::only_for_contended_keys) removes the cost
    /// where nothing collides, at a price described there.
    ///
    /// # The locks
    ///
    /// | database | lock per key | taken | released |
    /// |---|---|---|---|
    /// | Postgres | advisory lock on [`KeyHash::to_i64`](crate::KeyHash::to_i64) | with BEGIN (`txretry::sqlx`: in the same round trip; `txretry::tokio_postgres`: one round trip right after) | by COMMIT or ROLLBACK, or when the session ends |
    /// | MySQL, MariaDB | `GET_LOCK('txretry:<the 16 lowercase hex digits of KeyHash::to_u64>', <seconds>)` | one round trip for all the keys, right before `START TRANSACTION` | `DO RELEASE_ALL_LOCKS()` after COMMIT or ROLLBACK, or when the session ends |
    /// | SQLite | none: SQLite runs one writer at a time already, and its runners ignore this setting | | |
    ///
    /// Only numbers derived from the keys' hashes go into the SQL, never the keys
    /// themselves. The hash is specified byte for byte (see
    /// [`ContentionKey`](crate::ContentionKey)), so processes using different txretry
    /// runners on one database take turns with each other, and so does another service, in
    /// any language, that takes the same locks.
    ///
    /// **Postgres: try first, wait when taken.** An attempt first *tries* its keys' locks,
    /// without waiting, in one statement; only when another session holds one does it
    /// wait for them, in the same attempt (nothing of the transaction has run, so this is
    /// not a retry). A key found held, or whose attempt collided (a transient failure other
    /// than a lost connection), is *busy* for the next second, renewed while attempts
    /// queue for it in this process: this process's attempts on it wait at once, without
    /// the try.
    ///
    /// **Postgres, `txretry::sqlx`.** BEGIN's round trip is one message. When no key is
    /// busy:
    ///
    /// ```text
    /// <the transaction's BEGIN>; SELECT CAST(CASE WHEN pg_try_advisory_xact_lock(<key>) THEN …
    ///   '0' … ELSE 'txretry admission: advisory lock <key> is held by another session' END AS int)
    /// ```
    ///
    /// The `CASE`s try the keys in order and stop at the first one held elsewhere, whose
    /// text then fails the cast (`22P02`): sqlx discards BEGIN's rows, so only an error can
    /// say "taken", and plain SQL has no other way to raise one. The server logs that error
    /// like any other. The runner recognizes it (by its text) and sends, in one more round
    /// trip, `ROLLBACK;` and the waiting form, which is also what a busy key gets at once:
    ///
    /// ```text
    /// BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '<wait>ms';
    /// SELECT pg_advisory_lock(<key>); …; COMMIT;
    /// <the transaction's BEGIN>; SELECT pg_advisory_xact_lock(<key>), …; SELECT pg_advisory_unlock(<key>), …
    /// ```
    ///
    /// The wait happens in a short transaction of its own, at session level, before your
    /// transaction begins: under REPEATABLE READ and SERIALIZABLE the snapshot is taken
    /// once the keys are held, so the attempt sees what the previous holder committed
    /// instead of failing on it. The keys then move to transaction-level locks, which
    /// COMMIT, ROLLBACK and the end of the session release. `lock_timeout` is set in the
    /// short transaction only (at least 1 ms: 0 would mean no limit): your statements run
    /// with the session's own value. If a lock is not granted (`55P03`), the runner sends
    /// `ROLLBACK; SELECT pg_advisory_unlock_all()` before it pools the connection. (The try
    /// takes the snapshot too, but it never waits: a holder that commits in the
    /// microseconds between the two can cost a serialization failure, retried as usual,
    /// after which the key is busy and waited for first.)
    ///
    /// **Postgres, `txretry::tokio_postgres`.** tokio-postgres sends BEGIN itself, so the
    /// locks are taken in one more round trip, inside the transaction. When no key is busy,
    /// the try (it answers `false` when a key is held elsewhere, and keeps the keys before
    /// that one):
    ///
    /// ```text
    /// SELECT CASE WHEN pg_try_advisory_xact_lock(<key>) THEN … true … ELSE false END
    /// ```
    ///
    /// and, when it answered `false` or a key is busy, the wait:
    ///
    /// ```text
    /// SELECT set_config('txretry.lock_timeout', current_setting('lock_timeout'), true);
    /// SET LOCAL lock_timeout = '<wait>ms'; SELECT pg_advisory_xact_lock(<key>); …;
    /// SELECT set_config('lock_timeout', current_setting('txretry.lock_timeout'), true)
    /// ```
    ///
    /// Your statements run with the session's `lock_timeout` (the custom setting
    /// `txretry.lock_timeout` stays defined, empty, in the session). Under REPEATABLE READ
    /// and SERIALIZABLE the first of these statements takes the transaction's snapshot
    /// before the wait, so an attempt that waited for another transaction on the same rows
    /// fails with a serialization failure (`40001`) and is retried: there, prefer READ
    /// COMMITTED (with `SELECT … FOR UPDATE`) or `txretry::sqlx`.
    ///
    /// **MySQL and MariaDB.** Named locks belong to the session, not the transaction. They
    /// are taken before `START TRANSACTION` (no transaction is open while the attempt
    /// waits) and released with `DO RELEASE_ALL_LOCKS()` after COMMIT or ROLLBACK on every
    /// path; that releases every named lock the session holds, including any your closure
    /// took, so a pooled connection never carries one to its next borrower. A connection
    /// whose locks could not be released, or whose attempt was dropped while it held
    /// them, is closed instead of pooled. `GET_LOCK`'s timeout is in whole seconds on
    /// MySQL, so the wait is rounded up to whole seconds (0 tries once without waiting).
    /// `GET_LOCK` returning 0 (not granted in time) fails the attempt with error 1205
    /// (`LockTimeout`, transient); NULL (the wait was interrupted, e.g. by `KILL QUERY`)
    /// with 1317, "Query execution was interrupted" (permanent). The runners build these
    /// errors in the driver's own error type (see each runner's documentation); their
    /// message starts with `txretry admission:`. Needs MySQL ≥ 5.7 or MariaDB ≥ 10.0.2,
    /// which hold several named locks per session.
    ///
    /// **Cancellation.** Dropping a runner's future while it waits for a database lock
    /// gives back its place in this process's queue at once. The pooled runners close the
    /// connection; tokio-postgres queues a ROLLBACK on the client. The server notices only
    /// when its wait ends (the lock granted, or `wait` elapsed): it then ends the session,
    /// or rolls the transaction back, which releases every lock the attempt took. Until
    /// then the cancelled waiter keeps its place in the server's queue.
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

    /// Whether an attempt on `keys` takes their database locks now.
    fn locks_in_database(&self, keys: &[u64]) -> bool {
        match &self.contended {
            None => true,
            Some(collisions) => collisions.any_recent(keys, Instant::now()),
        }
    }

    /// Waits until every key is free and holds them until the permit is dropped. `keys`
    /// must be sorted without repeats (as [`TxOptions`](crate::TxOptions) keeps them):
    /// taking keys in one global order is what rules out waiting in a cycle.
    ///
    /// Cancel-safe: the permit is built before the first wait and owns each key's lock
    /// from the moment it is taken out of the map, so dropping this future at any point
    /// releases what it holds and forgets the keys nobody else uses.
    pub(crate) async fn admit(&self, keys: &[u64]) -> Permit {
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        let mut permit = Permit {
            admission: self.clone(),
            held: Vec::with_capacity(keys.len()),
        };
        // Whether another attempt of this process held one of the keys.
        let mut queued = false;
        for &key in keys {
            let lock = Arc::clone(
                self.locks()
                    .entry(key)
                    .or_insert_with(|| Arc::new(Semaphore::new(1))),
            );
            permit.held.push(Held {
                key,
                lock,
                acquired: false,
            });
            let held = permit.held.last_mut().expect("just pushed");
            // No await between taking the semaphore's permit and recording it, so a
            // cancellation sees either a pending wait (the semaphore takes it back) or
            // `acquired` (the permit gives it back).
            match held.lock.try_acquire() {
                Ok(free) => free.forget(),
                Err(_) => {
                    queued = true;
                    held.lock
                        .acquire()
                        .await
                        .expect("admission never closes a semaphore")
                        .forget();
                }
            }
            held.acquired = true;
        }
        if queued {
            // Demand for these keys in this process goes on: keep contended ones locked,
            // and busy ones waited for without a try.
            let now = Instant::now();
            for collisions in [&self.contended, &self.busy].into_iter().flatten() {
                collisions.renew(keys, now);
            }
        }
        permit
    }

    /// The map of keys in use, even if a thread panicked while holding it (every update
    /// under this lock is a single map operation, so it is never left half done).
    fn locks(&self) -> MutexGuard<'_, Locks> {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many keys are held or waited for.
    fn keys_in_use(&self) -> usize {
        self.locks().len()
    }
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Admission");
        debug.field("keys_in_use", &self.keys_in_use());
        if let Some(wait) = &self.database {
            debug.field("in_database", wait);
        }
        if let Some(collisions) = &self.contended {
            debug.field("only_for_contended_keys", &collisions.window);
        }
        debug.finish()
    }
}

impl Collisions {
    fn new(window: Duration) -> Self {
        Collisions {
            window,
            recent: Mutex::new(RecentCollisions {
                last: HashMap::new(),
                forget_above: KEEP_COLLISIONS,
            }),
        }
    }

    /// The map, even if a thread panicked while holding it (every update under this lock
    /// leaves it consistent).
    fn recent(&self) -> MutexGuard<'_, RecentCollisions> {
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether any of `keys` collided less than `window` before `now`.
    fn any_recent(&self, keys: &[u64], now: Instant) -> bool {
        let recent = self.recent();
        keys.iter().any(|key| {
            recent
                .last
                .get(key)
                .is_some_and(|&at| now.saturating_duration_since(at) < self.window)
        })
    }

    /// Keeps those of `keys` that are still contended at `now` contended for another
    /// `window`: an attempt had to queue for them in this process.
    fn renew(&self, keys: &[u64], now: Instant) {
        let mut recent = self.recent();
        for key in keys {
            if let Some(at) = recent.last.get_mut(key)
                && now.saturating_duration_since(*at) < self.window
            {
                *at = now;
            }
        }
    }

    /// Records that `keys` collided at `now`.
    fn note(&self, keys: &[u64], now: Instant) {
        let mut recent = self.recent();
        for &key in keys {
            recent.last.insert(key, now);
        }
        if recent.last.len() > recent.forget_above {
            let window = self.window;
            recent
                .last
                .retain(|_, at| now.saturating_duration_since(*at) < window);
            recent.forget_above = (2 * recent.last.len()).max(KEEP_COLLISIONS);
        }
    }
}

/// After a failed attempt under [`Admission::in_database`]: a transient failure other than
/// a lost connection marks the transaction's keys busy (see [`note_busy`]) and, under
/// [`Admission::only_for_contended_keys`], contended. Does nothing otherwise (and costs
/// nothing on the success path, where it is never called).
#[doc(hidden)]
pub fn note_failure(policy: &crate::RetryPolicy, options: &crate::TxOptions, verdict: Verdict) {
    let collided = matches!(verdict, Verdict::Transient(kind) if !kind.loses_session());
    if let (true, Some(admission)) = (collided, policy.admission())
        && !options.keys().is_empty()
    {
        let now = Instant::now();
        for collisions in [&admission.contended, &admission.busy]
            .into_iter()
            .flatten()
        {
            collisions.note(options.keys(), now);
        }
    }
}

/// Held while one attempt runs; releasing it lets the next attempt on the same keys in.
///
/// It owns every clone of a key's lock that admission takes out of the map, including
/// while [`Admission::admit`] still waits for later keys, so its drop is the one place
/// that gives keys back and forgets unused ones.
#[doc(hidden)]
pub struct Permit {
    admission: Admission,
    held: Vec<Held>,
}

/// One key of a [`Permit`]: its lock (a clone of the map's `Arc`), and whether the
/// permit holds it or is still waiting for it.
struct Held {
    key: u64,
    lock: Arc<Semaphore>,
    acquired: bool,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        for held in self.held.iter().rev() {
            if held.acquired {
                held.lock.add_permits(1);
            }
        }
        // Forget keys nobody else holds or waits for, so the map does not grow without
        // bound. Each permit lets go of its clone of a lock before it looks at the count
        // (under the map lock), so whichever lets go last sees 1: only the map's. Clones
        // are only made under the map lock, so then nobody can be using the key.
        let mut locks = self.admission.locks();
        for Held { key, lock, .. } in self.held.drain(..) {
            drop(lock);
            if let Entry::Occupied(entry) = locks.entry(key)
                && Arc::strong_count(entry.get()) == 1
            {
                entry.remove();
            }
        }
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

/// The database locks one attempt takes under [`Admission::in_database`]: the named keys
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
/// [`in_database`](Admission::in_database), the transaction named keys, and (under
/// [`only_for_contended_keys`](Admission::only_for_contended_keys)) one of them is
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
    let try_first = admission
        .busy
        .as_ref()
        .is_none_or(|busy| !busy.any_recent(keys, Instant::now()));
    Some(DatabaseLocks {
        keys,
        wait,
        try_first,
    })
}

/// After a Postgres attempt found one of its keys locked by another session (its try
/// failed): the transaction's keys are *busy*, and for the next second their attempts wait
/// for the locks at once instead of trying them first.
#[doc(hidden)]
pub fn note_busy(policy: &crate::RetryPolicy, options: &crate::TxOptions) {
    if let Some(busy) = policy.admission().and_then(|a| a.busy.as_ref()) {
        busy.note(options.keys(), Instant::now());
    }
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
    use crate::TransientKind;
    use std::collections::HashSet;
    use std::time::Duration;

    use tokio::time::{Instant, timeout};

    const SECOND: Duration = Duration::from_secs(1);

    /// Whether `keys` are admitted within a second (paused time: without waiting for
    /// anyone). The permit is released at once.
    async fn free(admission: &Admission, keys: &[u64]) -> bool {
        timeout(SECOND, admission.admit(keys)).await.is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn the_same_key_is_admitted_once_at_a_time() {
        let admission = Admission::per_key();
        let first = admission.admit(&[1]).await;
        let mut second = Box::pin(admission.admit(&[1]));
        assert!(timeout(SECOND, &mut second).await.is_err());
        drop(first);
        let _second = timeout(SECOND, second).await.expect("admitted");
    }

    #[tokio::test(start_paused = true)]
    async fn different_keys_do_not_wait_for_each_other() {
        let admission = Admission::per_key();
        let _a = admission.admit(&[1]).await;
        assert!(free(&admission, &[2]).await);
    }

    #[tokio::test]
    async fn released_keys_are_forgotten() {
        let admission = Admission::per_key();
        let permit = admission.admit(&[1, 2]).await;
        assert_eq!(admission.keys_in_use(), 2);
        drop(permit);
        assert_eq!(admission.keys_in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_transaction_cancelled_waiting_for_its_second_key_leaves_no_key() {
        let admission = Admission::per_key();
        let holder = admission.admit(&[2]).await;
        // Takes key 1, then waits for key 2 until the timeout drops it.
        assert!(timeout(SECOND, admission.admit(&[1, 2])).await.is_err());
        assert_eq!(admission.keys_in_use(), 1, "only the holder's key is left");
        assert!(free(&admission, &[1]).await, "key 1 was given back");
        drop(holder);
        assert_eq!(admission.keys_in_use(), 0);
        assert!(free(&admission, &[1, 2]).await);
        assert_eq!(admission.keys_in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_cancelled_right_after_handover_leaves_no_key() {
        let admission = Admission::per_key();
        let holder = admission.admit(&[1]).await;
        let mut waiter = Box::pin(admission.admit(&[1]));
        assert!(timeout(SECOND, &mut waiter).await.is_err());
        // The holder hands key 1 over to the waiter, which is dropped before it runs.
        drop(holder);
        drop(waiter);
        assert_eq!(admission.keys_in_use(), 0);
        assert!(
            free(&admission, &[1]).await,
            "the handed-over key was not lost"
        );
        assert_eq!(admission.keys_in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_handover_to_a_cancelled_waiter_passes_on_to_the_next() {
        let admission = Admission::per_key();
        let holder = admission.admit(&[1, 2]).await;
        let mut first = Box::pin(admission.admit(&[1, 2]));
        let mut second = Box::pin(admission.admit(&[1]));
        assert!(timeout(SECOND, &mut first).await.is_err());
        assert!(timeout(SECOND, &mut second).await.is_err());
        drop(holder);
        drop(first);
        let second = timeout(SECOND, second).await.expect("admitted");
        assert_eq!(admission.keys_in_use(), 1);
        drop(second);
        assert_eq!(admission.keys_in_use(), 0);
    }

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

    fn policy_with(admission: Admission) -> crate::RetryPolicy {
        crate::RetryPolicy::builder()
            .admission(admission)
            .build()
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn contended_keys_take_database_locks_for_a_window_after_a_collision() {
        let window = Duration::from_secs(10);
        let policy = policy_with(
            Admission::per_key()
                .in_database(SECOND)
                .only_for_contended_keys(window),
        );
        let pair = crate::TxOptions::new().contends_on(1).contends_on(2);
        let one = crate::TxOptions::new().contends_on(2);
        let other = crate::TxOptions::new().contends_on(3);
        assert_eq!(database_locks(&policy, &pair), None, "nothing collided yet");
        // Neither a business error nor a lost connection is a collision.
        note_failure(&policy, &one, Verdict::Permanent);
        note_failure(&policy, &one, Verdict::Transient(TransientKind::Connection));
        note_failure(&policy, &one, Verdict::Ambiguous);
        assert_eq!(database_locks(&policy, &one), None);
        note_failure(&policy, &one, Verdict::Transient(TransientKind::Deadlock));
        let locks = database_locks(&policy, &one).expect("key 2 is contended");
        assert_eq!(locks.keys().count(), 1);
        // A transaction naming a contended key locks all its keys; others lock none.
        let locks = database_locks(&policy, &pair).expect("one of its keys is contended");
        assert_eq!(locks.keys().count(), 2);
        assert_eq!(database_locks(&policy, &other), None);
        // The window runs from the last collision.
        tokio::time::advance(window - Duration::from_millis(1)).await;
        assert!(database_locks(&policy, &one).is_some());
        note_failure(
            &policy,
            &pair,
            Verdict::Transient(TransientKind::SerializationFailure),
        );
        tokio::time::advance(window - Duration::from_millis(1)).await;
        assert!(database_locks(&policy, &one).is_some(), "renewed");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(database_locks(&policy, &one), None, "window over");
        assert_eq!(database_locks(&policy, &pair), None);
        // Clones share what they learned; another Admission does not.
        let clone = policy_with(policy.admission().unwrap().clone());
        note_failure(&clone, &other, Verdict::Transient(TransientKind::Busy));
        assert!(database_locks(&policy, &other).is_some());
        let separate = policy_with(
            Admission::per_key()
                .in_database(SECOND)
                .only_for_contended_keys(window),
        );
        assert_eq!(database_locks(&separate, &other), None);
    }

    /// One attempt on `keys` that queues for half a second behind another, then runs.
    async fn queue_behind_another(admission: &Admission, keys: &[u64]) {
        let holder = admission.admit(keys).await;
        let mut waiter = Box::pin(admission.admit(keys));
        assert!(
            timeout(Duration::from_millis(500), &mut waiter)
                .await
                .is_err()
        );
        drop(holder);
        drop(waiter.await);
    }

    #[tokio::test(start_paused = true)]
    async fn queueing_in_this_process_keeps_a_contended_key_locked() {
        let window = Duration::from_secs(10);
        let admission = Admission::per_key()
            .in_database(SECOND)
            .only_for_contended_keys(window);
        let policy = policy_with(admission.clone());
        let key = crate::TxOptions::new().contends_on(1);
        let hash = [crate::KeyHash::of(1).to_u64()];
        note_failure(&policy, &key, Verdict::Transient(TransientKind::Deadlock));
        // An attempt that did not queue renews nothing.
        tokio::time::advance(Duration::from_secs(9)).await;
        drop(admission.admit(&hash).await);
        // One that queued behind another attempt on the key renews it.
        queue_behind_another(&admission, &hash).await;
        // Renewed at 9.5 s: contended until 19.5 s.
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(
            database_locks(&policy, &key).is_some(),
            "renewed by queueing"
        );
        tokio::time::advance(SECOND).await;
        assert_eq!(database_locks(&policy, &key), None, "window over");
        // Queueing never makes a key contended by itself.
        queue_behind_another(&admission, &hash).await;
        assert_eq!(database_locks(&policy, &key), None);
    }

    #[tokio::test(start_paused = true)]
    async fn collisions_past_their_window_are_forgotten() {
        let window = SECOND;
        let admission = Admission::per_key()
            .in_database(SECOND)
            .only_for_contended_keys(window);
        let collisions = admission.contended.clone().unwrap();
        let len = || collisions.recent().last.len();
        for key in 0..1_000 {
            collisions.note(&[key], Instant::now());
        }
        assert_eq!(len(), 1_000);
        tokio::time::advance(window).await;
        // New collisions push the map past its threshold (at most twice what was kept at
        // the last cleanup), which forgets every key whose window is over.
        for key in 1_000..3_000 {
            collisions.note(&[key], Instant::now());
        }
        let kept = collisions.recent();
        assert!(!kept.last.contains_key(&0), "an old collision is kept");
        assert!(kept.last.len() <= 2_000, "{} entries kept", kept.last.len());
        drop(kept);
        assert!(collisions.any_recent(&[2_999], Instant::now()));
        assert!(!collisions.any_recent(&[0], Instant::now()));
    }

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

    #[tokio::test(start_paused = true)]
    async fn busy_keys_are_waited_for_at_once_for_a_second() {
        let policy = policy_with(Admission::per_key().in_database(SECOND));
        let one = crate::TxOptions::new().contends_on(1);
        let pair = crate::TxOptions::new().contends_on(1).contends_on(2);
        let other = crate::TxOptions::new().contends_on(3);
        let tries =
            |options: &crate::TxOptions| database_locks(&policy, options).unwrap().try_first();
        assert!(tries(&one) && tries(&pair) && tries(&other));
        // Found held by another session.
        note_busy(&policy, &one);
        assert!(!tries(&one));
        assert!(!tries(&pair), "a transaction with a busy key waits for all");
        assert!(tries(&other));
        tokio::time::advance(BUSY_WINDOW - Duration::from_millis(1)).await;
        assert!(!tries(&one));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(tries(&one), "a second later, tried first again");
        // Queueing in this process keeps a busy key busy, and never makes one busy.
        let hash = [crate::KeyHash::of(1).to_u64()];
        let admission = policy.admission().unwrap();
        queue_behind_another(admission, &hash).await;
        assert!(tries(&one));
        note_busy(&policy, &one);
        // Busy from 0 s; the queued attempt is admitted (and renews) at 0.75 s.
        tokio::time::advance(BUSY_WINDOW / 4).await;
        queue_behind_another(admission, &hash).await;
        tokio::time::advance(BUSY_WINDOW / 2).await;
        assert!(!tries(&one), "renewed by queueing");
        tokio::time::advance(BUSY_WINDOW).await;
        assert!(tries(&one));
        // A collision makes its keys busy too; a business error or a lost connection not.
        note_failure(&policy, &other, Verdict::Permanent);
        note_failure(
            &policy,
            &other,
            Verdict::Transient(TransientKind::Connection),
        );
        assert!(tries(&other));
        note_failure(
            &policy,
            &other,
            Verdict::Transient(TransientKind::SerializationFailure),
        );
        assert!(!tries(&other));
        // Clones share it; without database locks there is nothing to note.
        let clone = policy_with(policy.admission().unwrap().clone());
        note_busy(&clone, &pair);
        assert!(!tries(&pair));
        note_busy(&policy_with(Admission::per_key()), &one);
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

    /// Keys come from a small set (so they are contended) that moves on every
    /// `EPOCH` (so a key leaked on the way is not cleaned up by chance when a later
    /// admission of the same key releases it).
    const SET: u64 = 5;
    const EPOCH: Duration = Duration::from_millis(20);

    /// Two different keys out of the current set, sorted.
    fn two_keys(rng: &mut fastrand::Rng, start: Instant) -> [u64; 2] {
        let epoch = u64::try_from(start.elapsed().as_millis() / EPOCH.as_millis()).unwrap();
        let a = rng.u64(0..SET);
        let b = (a + rng.u64(1..SET)) % SET;
        [epoch * SET + a.min(b), epoch * SET + a.max(b)]
    }

    /// The keys held at the moment, to check that no key is ever held twice.
    type Holders = Mutex<HashSet<u64>>;

    /// Admits `keys`, checks nobody else holds them, holds them for `hold`, and releases
    /// them.
    async fn hold(admission: &Admission, holders: &Holders, keys: [u64; 2], hold: Duration) {
        let permit = admission.admit(&keys).await;
        for k in keys {
            assert!(holders.lock().unwrap().insert(k), "key {k} held twice");
        }
        // Leaves even when the timeout drops this future mid-sleep.
        struct Leave<'a>(&'a Holders, [u64; 2]);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                for k in self.1 {
                    self.0.lock().unwrap().remove(&k);
                }
            }
        }
        let leave = Leave(holders, keys);
        if !hold.is_zero() {
            tokio::time::sleep(hold).await;
        }
        drop(leave);
        drop(permit);
    }

    /// What a run of [`random_cancellation`] did.
    #[derive(Default)]
    struct Run {
        cancelled: usize,
        last_key: u64,
    }

    /// Runs `tasks × rounds` admissions, each on two keys of the current set under a
    /// random timeout that cancels many of them while they wait or while they hold keys.
    async fn random_cancellation(admission: Admission, seed: u64, tasks: u64, rounds: u64) -> Run {
        let start = Instant::now();
        let holders = Arc::new(Holders::default());
        let mut handles = Vec::new();
        for task in 0..tasks {
            let (admission, holders) = (admission.clone(), holders.clone());
            handles.push(tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed(seed ^ (task << 8));
                let mut run = Run::default();
                for _ in 0..rounds {
                    let keys = two_keys(&mut rng, start);
                    run.last_key = run.last_key.max(keys[1]);
                    // Whole milliseconds (the timer's resolution), so that timeouts
                    // often fire in the same tick as a release hands a key over.
                    let limit = Duration::from_millis(rng.u64(0..4));
                    let held = Duration::from_millis(rng.u64(0..3));
                    let admitted = hold(&admission, &holders, keys, held);
                    if timeout(limit, admitted).await.is_err() {
                        run.cancelled += 1;
                    }
                }
                run
            }));
        }
        let mut total = Run::default();
        for handle in handles {
            let run = handle.await.expect("no task panicked");
            total.cancelled += run.cancelled;
            total.last_key = total.last_key.max(run.last_key);
        }
        total
    }

    /// After everything is released: no key is left in the map, and none was lost (the
    /// first and the last set are free at once).
    async fn all_released(admission: &Admission, last_key: u64) {
        assert_eq!(admission.keys_in_use(), 0, "every key was forgotten");
        let last_set = last_key / SET * SET;
        let keys: Vec<u64> = (0..SET)
            .chain(last_set.max(SET)..last_set.max(SET) + SET)
            .collect();
        assert!(free(admission, &keys).await, "no key was lost");
        assert_eq!(admission.keys_in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn random_cancellation_leaves_no_keys() {
        let admission = Admission::per_key();
        let run = random_cancellation(admission.clone(), 7, 20, 1_000).await;
        assert!(
            run.cancelled > 2_000,
            "only {} of 20,000 cancelled",
            run.cancelled
        );
        assert!(run.last_key > 100, "the key set moved on");
        all_released(&admission, run.last_key).await;
    }

    /// The same on four threads at once (each its own runtime, in real time), so that
    /// releases, cancellations and admissions really race.
    #[test]
    fn random_cancellation_across_threads_leaves_no_keys() {
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .expect("runtime")
        };
        let admission = Admission::per_key();
        let threads: Vec<_> = (0..4)
            .map(|thread| {
                let admission = admission.clone();
                std::thread::spawn(move || {
                    runtime().block_on(random_cancellation(admission, thread, 20, 250))
                })
            })
            .collect();
        let mut total = Run::default();
        for thread in threads {
            let run = thread.join().expect("no thread panicked");
            total.cancelled += run.cancelled;
            total.last_key = total.last_key.max(run.last_key);
        }
        assert!(total.cancelled > 0);
        runtime().block_on(all_released(&admission, total.last_key));
    }
}
