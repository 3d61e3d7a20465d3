//! Contention-aware admission: transactions that name the key they contend on wait for
//! each other in this process instead of colliding in the database and retrying.
//!
//! Backoff spreads retries out after the collision; admission avoids the collision. With
//! many workers on a few hot rows, the database aborts most concurrent updates of the same
//! row (serialization failures, deadlocks), and every abort wastes a round of work. Letting
//! at most one attempt per key run at a time keeps every distinct key busy, so goodput
//! stays at its peak however many workers there are, and retries almost vanish.

use std::collections::HashMap;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// Admission control for a [`RetryPolicy`](crate::RetryPolicy), set with
/// [`RetryPolicyBuilder::admission`](crate::RetryPolicyBuilder::admission). Clones share
/// their state, so one `Admission` coordinates every task that uses policies built with it.
///
/// Only the async runners admit (the blocking SQLite runner does not need it: `BEGIN
/// IMMEDIATE` already makes SQLite admit one writer at a time), and only transactions
/// that name keys with [`TxOptions::contends_on`](crate::TxOptions::contends_on).
/// Coordination is per process: several processes still meet in the database.
///
/// ```
/// use txretry_core::{Admission, RetryPolicy, TxOptions};
///
/// let policy = RetryPolicy::builder().max_attempts(10).admission(Admission::per_key()).build()?;
/// // Each transaction names the row it updates; two on the same row never overlap.
/// let options = TxOptions::new().contends_on(("account", 42));
/// # let _ = (policy, options);
/// # Ok::<(), txretry_core::PolicyError>(())
/// ```
#[derive(Clone, Default)]
pub struct Admission {
    keys: Arc<Mutex<HashMap<u64, Arc<AsyncMutex<()>>>>>,
}

impl Admission {
    /// At most one attempt in flight per key. A transaction naming several keys takes them
    /// in a fixed order, so two transactions can never wait for each other in a cycle.
    pub fn per_key() -> Self {
        Admission::default()
    }

    /// Waits until every key is free and holds them until the permit is dropped.
    pub(crate) async fn admit(&self, keys: &[u64]) -> Permit {
        let mut held = Vec::with_capacity(keys.len());
        for &key in keys {
            let lock = self
                .keys
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(key)
                .or_default()
                .clone();
            held.push((key, lock.lock_owned().await));
        }
        Permit {
            admission: self.clone(),
            held,
        }
    }
}

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = self
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("Admission")
            .field("keys_in_use", &keys)
            .finish()
    }
}

/// Held while one attempt runs; releasing it lets the next attempt on the same keys in.
#[doc(hidden)]
pub struct Permit {
    admission: Admission,
    held: Vec<(u64, OwnedMutexGuard<()>)>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let keys: Vec<u64> = self.held.iter().map(|(k, _)| *k).collect();
        self.held.clear();
        // Forget keys nobody holds or waits for, so the map does not grow without bound.
        let mut map = self
            .admission
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for key in keys {
            if map
                .get(&key)
                .is_some_and(|lock| Arc::strong_count(lock) == 1)
            {
                map.remove(&key);
            }
        }
    }
}

/// A key as admission stores it: its hash, so any `Hash` value can name a key.
pub(crate) fn key_of(key: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
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
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn the_same_key_is_admitted_once_at_a_time() {
        let admission = Admission::per_key();
        let first = admission.admit(&[1]).await;
        let mut second = Box::pin(admission.admit(&[1]));
        assert!(
            tokio::time::timeout(Duration::from_secs(1), &mut second)
                .await
                .is_err()
        );
        drop(first);
        let _second = tokio::time::timeout(Duration::from_secs(1), second)
            .await
            .expect("admitted");
    }

    #[tokio::test(start_paused = true)]
    async fn different_keys_do_not_wait_for_each_other() {
        let admission = Admission::per_key();
        let _a = admission.admit(&[1]).await;
        let b = tokio::time::timeout(Duration::from_secs(1), admission.admit(&[2])).await;
        assert!(b.is_ok());
    }

    #[tokio::test]
    async fn released_keys_are_forgotten() {
        let admission = Admission::per_key();
        drop(admission.admit(&[1, 2]).await);
        assert_eq!(admission.keys.lock().unwrap().len(), 0);
    }
}
