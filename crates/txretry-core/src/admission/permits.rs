//! The in-process half of admission: one queue per key, so that at most one attempt per
//! key runs at a time in this process, while attempts on different keys run in parallel.
//!
//! Each key in use has a tokio [`Semaphore`] with one permit. Tokio's semaphore is fair
//! (waiters are served first come, first served), gives a permit back when a waiting
//! future is dropped, and passes a released permit on to the next waiter, so this module
//! only has to keep the map of keys bounded: a key's entry lives while anyone holds or
//! waits for it, and the [`Permit`] that lets go last removes it.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Each key in use and its lock: a semaphore with one permit.
type Locks = HashMap<u64, Arc<Semaphore>>;

/// The keys in use in this process and their locks. Clones share the map, so every clone
/// of one [`Admission`](super::Admission) queues on the same locks.
#[derive(Clone, Default)]
pub(super) struct KeyPermits {
    locks: Arc<Mutex<Locks>>,
}

impl KeyPermits {
    /// Waits until every key is free and holds them until the permit is dropped. `keys`
    /// must be sorted without repeats (as [`TxOptions`](crate::TxOptions) keeps them):
    /// taking keys in one global order is what rules out waiting in a cycle.
    ///
    /// Cancel-safe: the permit is built before the first wait and names each key from the
    /// moment its lock is taken out of the map, so dropping this future at any point
    /// releases what it holds and forgets the keys nobody else uses.
    pub(super) async fn acquire(&self, keys: &[u64]) -> Permit {
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        let mut permit = Permit {
            permits: self.clone(),
            held: Vec::with_capacity(keys.len()),
            queued: false,
        };
        for &key in keys {
            // The map's `Arc` is only cloned under the map lock (here); the clones below are
            // of this one. See `Permit::drop` for why.
            let lock = Arc::clone(
                self.locks()
                    .entry(key)
                    .or_insert_with(|| Arc::new(Semaphore::new(1))),
            );
            permit.held.push(Held { key, taken: None });
            // No await between the semaphore granting its permit and the permit being
            // stored, so a cancellation sees either a pending wait (the semaphore takes it
            // back) or `taken` (dropping the permit gives it back). While this waits, the
            // clone of the lock lives in the `acquire_owned` future, which is dropped
            // before `permit` (it is a temporary of an inner scope), so `Permit::drop`
            // counts only the clones still in use.
            let taken = match Arc::clone(&lock).try_acquire_owned() {
                Ok(free) => free,
                Err(_) => {
                    permit.queued = true;
                    lock.acquire_owned()
                        .await
                        .expect("admission never closes a semaphore")
                }
            };
            permit.held.last_mut().expect("just pushed").taken = Some(taken);
        }
        permit
    }

    /// The map of keys in use, even if a thread panicked while holding it (every update
    /// under this lock is a single map operation, so it is never left half done).
    fn locks(&self) -> MutexGuard<'_, Locks> {
        self.locks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many keys are held or waited for.
    pub(super) fn in_use(&self) -> usize {
        self.locks().len()
    }
}

/// Held while one attempt runs; releasing it lets the next attempt on the same keys in.
///
/// It names every key whose lock admission took out of the map, including while
/// [`KeyPermits::acquire`] still waits for later keys, so its drop is the one place that
/// forgets unused keys.
#[doc(hidden)]
pub struct Permit {
    permits: KeyPermits,
    held: Vec<Held>,
    /// Whether one of the keys was held by another attempt of this process, so that this
    /// one had to queue for it.
    queued: bool,
}

/// One key of a [`Permit`], and its semaphore's permit once taken (`None` while the
/// permit still waits for it). The semaphore permit owns a clone of the map's `Arc`.
struct Held {
    key: u64,
    taken: Option<OwnedSemaphorePermit>,
}

impl Permit {
    /// Whether this attempt had to queue behind another attempt of this process for one
    /// of its keys: the sign that demand for them goes on.
    pub(super) fn queued(&self) -> bool {
        self.queued
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        // Give the keys back, the last taken first; each goes to its next waiter, if any.
        for held in self.held.iter_mut().rev() {
            drop(held.taken.take());
        }
        // Forget keys nobody else holds or waits for, so the map does not grow without
        // bound. Each permit lets go of its clones of a lock (above, and in the wait it may
        // have been dropped in) before it looks at the count under the map lock, so
        // whichever lets go last sees 1: only the map's. The map's `Arc` is only cloned
        // under the map lock, and every other clone is of one of those, so then nobody can
        // be using the key.
        let mut locks = self.permits.locks();
        for Held { key, .. } in self.held.drain(..) {
            if let Entry::Occupied(entry) = locks.entry(key)
                && Arc::strong_count(entry.get()) == 1
            {
                entry.remove();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::time::Duration;

    use tokio::time::{Instant, timeout};

    const SECOND: Duration = Duration::from_secs(1);

    /// Whether `keys` are admitted within a second (paused time: without waiting for
    /// anyone). The permit is released at once.
    async fn free(permits: &KeyPermits, keys: &[u64]) -> bool {
        timeout(SECOND, permits.acquire(keys)).await.is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn the_same_key_is_admitted_once_at_a_time() {
        let permits = KeyPermits::default();
        let first = permits.acquire(&[1]).await;
        assert!(!first.queued());
        let mut second = Box::pin(permits.acquire(&[1]));
        assert!(timeout(SECOND, &mut second).await.is_err());
        drop(first);
        let second = timeout(SECOND, second).await.expect("admitted");
        assert!(second.queued());
    }

    #[tokio::test(start_paused = true)]
    async fn different_keys_do_not_wait_for_each_other() {
        let permits = KeyPermits::default();
        let _a = permits.acquire(&[1]).await;
        assert!(free(&permits, &[2]).await);
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_are_admitted_in_arrival_order() {
        let permits = KeyPermits::default();
        let order = Arc::new(Mutex::new(Vec::new()));
        let holder = permits.acquire(&[1]).await;
        let mut waiters = Vec::new();
        for waiter in 0..4 {
            let (permits, order) = (permits.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                let _permit = permits.acquire(&[1]).await;
                order.lock().unwrap().push(waiter);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }));
            // Each waiter queues before the next one is spawned.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        drop(holder);
        for waiter in waiters {
            waiter.await.expect("no waiter panicked");
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
        assert_eq!(permits.in_use(), 0);
    }

    #[tokio::test]
    async fn released_keys_are_forgotten() {
        let permits = KeyPermits::default();
        let permit = permits.acquire(&[1, 2]).await;
        assert_eq!(permits.in_use(), 2);
        drop(permit);
        assert_eq!(permits.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_transaction_cancelled_waiting_for_its_second_key_leaves_no_key() {
        let permits = KeyPermits::default();
        let holder = permits.acquire(&[2]).await;
        // Takes key 1, then waits for key 2 until the timeout drops it.
        assert!(timeout(SECOND, permits.acquire(&[1, 2])).await.is_err());
        assert_eq!(permits.in_use(), 1, "only the holder's key is left");
        assert!(free(&permits, &[1]).await, "key 1 was given back");
        drop(holder);
        assert_eq!(permits.in_use(), 0);
        assert!(free(&permits, &[1, 2]).await);
        assert_eq!(permits.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_cancelled_right_after_handover_leaves_no_key() {
        let permits = KeyPermits::default();
        let holder = permits.acquire(&[1]).await;
        let mut waiter = Box::pin(permits.acquire(&[1]));
        assert!(timeout(SECOND, &mut waiter).await.is_err());
        // The holder hands key 1 over to the waiter, which is dropped before it runs.
        drop(holder);
        drop(waiter);
        assert_eq!(permits.in_use(), 0);
        assert!(
            free(&permits, &[1]).await,
            "the handed-over key was not lost"
        );
        assert_eq!(permits.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_handover_to_a_cancelled_waiter_passes_on_to_the_next() {
        let permits = KeyPermits::default();
        let holder = permits.acquire(&[1, 2]).await;
        let mut first = Box::pin(permits.acquire(&[1, 2]));
        let mut second = Box::pin(permits.acquire(&[1]));
        assert!(timeout(SECOND, &mut first).await.is_err());
        assert!(timeout(SECOND, &mut second).await.is_err());
        drop(holder);
        drop(first);
        let second = timeout(SECOND, second).await.expect("admitted");
        assert_eq!(permits.in_use(), 1);
        drop(second);
        assert_eq!(permits.in_use(), 0);
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
    async fn hold(permits: &KeyPermits, holders: &Holders, keys: [u64; 2], hold: Duration) {
        let permit = permits.acquire(&keys).await;
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
    async fn random_cancellation(permits: KeyPermits, seed: u64, tasks: u64, rounds: u64) -> Run {
        let start = Instant::now();
        let holders = Arc::new(Holders::default());
        let mut handles = Vec::new();
        for task in 0..tasks {
            let (permits, holders) = (permits.clone(), holders.clone());
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
                    let admitted = hold(&permits, &holders, keys, held);
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
    async fn all_released(permits: &KeyPermits, last_key: u64) {
        assert_eq!(permits.in_use(), 0, "every key was forgotten");
        let last_set = last_key / SET * SET;
        let keys: Vec<u64> = (0..SET)
            .chain(last_set.max(SET)..last_set.max(SET) + SET)
            .collect();
        assert!(free(permits, &keys).await, "no key was lost");
        assert_eq!(permits.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn random_cancellation_leaves_no_keys() {
        let permits = KeyPermits::default();
        let run = random_cancellation(permits.clone(), 7, 20, 1_000).await;
        assert!(
            run.cancelled > 2_000,
            "only {} of 20,000 cancelled",
            run.cancelled
        );
        assert!(run.last_key > 100, "the key set moved on");
        all_released(&permits, run.last_key).await;
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
        let permits = KeyPermits::default();
        let threads: Vec<_> = (0..4)
            .map(|thread| {
                let permits = permits.clone();
                std::thread::spawn(move || {
                    runtime().block_on(random_cancellation(permits, thread, 20, 250))
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
        runtime().block_on(all_released(&permits, total.last_key));
    }
}
