//! What admission learns from failed attempts: which keys collided lately. Two windows use
//! it, both over the keys' hashes:
//!
//! - *contended* keys ([`Admission::only_for_contended_keys`]): a key whose attempt
//!   collided takes its database locks for a window afterwards; the others take none;
//! - *busy* keys ([`Admission::in_database`], for Postgres): a key found locked by another
//!   session, or whose attempt collided, has its locks waited for at once for
//!   [`BUSY_WINDOW`], instead of tried first.
//!
//! Both windows are renewed while attempts keep queueing for the key in this process: with
//! the locks keeping collisions away, queueing is the sign that a key is still in demand.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::Admission;
use crate::Verdict;

/// When each key last collided (for [`Admission::only_for_contended_keys`]) or was found
/// busy (for [`Admission::in_database`] on Postgres). Shared by the clones of one
/// `Admission`.
pub(super) struct Collisions {
    /// How long a key stays marked after its last collision (or renewal).
    pub(super) window: Duration,
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
pub(super) const BUSY_WINDOW: Duration = Duration::from_secs(1);

impl Collisions {
    pub(super) fn new(window: Duration) -> Self {
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

impl Admission {
    /// Whether an attempt on `keys` takes their database locks now: always, unless
    /// [`only_for_contended_keys`](Admission::only_for_contended_keys) limits them to keys
    /// that collided within its window.
    pub(super) fn locks_in_database(&self, keys: &[u64]) -> bool {
        match &self.contended {
            None => true,
            Some(collisions) => collisions.any_recent(keys, Instant::now()),
        }
    }

    /// Whether one of `keys` is busy: found locked by another session, or its attempt
    /// collided, within the last [`BUSY_WINDOW`].
    pub(super) fn any_busy(&self, keys: &[u64]) -> bool {
        self.busy
            .as_ref()
            .is_some_and(|busy| busy.any_recent(keys, Instant::now()))
    }

    /// After an attempt on `keys` had to queue in this process: demand for them goes on,
    /// so keep contended ones locked, and busy ones waited for without a try.
    pub(super) fn renew_after_queueing(&self, keys: &[u64]) {
        let now = Instant::now();
        for collisions in self.windows() {
            collisions.renew(keys, now);
        }
    }

    /// The windows this admission keeps: contended keys, busy keys, both, or neither.
    fn windows(&self) -> impl Iterator<Item = &Collisions> {
        [&self.contended, &self.busy]
            .into_iter()
            .flatten()
            .map(|collisions| &**collisions)
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
        for collisions in admission.windows() {
            collisions.note(options.keys(), now);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TransientKind;
    use crate::admission::database_locks;

    use tokio::time::timeout;

    const SECOND: Duration = Duration::from_secs(1);

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
}
