//! Admission across processes, checked by the intervals transactions record: the plan
//! every driver's "two processes" test follows (two pools or sets of clients standing in
//! for two processes, each with a policy and an `Admission` of its own), the meeting that
//! forces an overlap, and the checks on what was recorded.
//!
//! Each transaction inserts a row `(id, k, process, started, ended)` into a table of its
//! test's own, inside the transaction (after its locks), and sets `ended` before it
//! commits; [`overlaps_sql`] counts the pairs of rows on one key whose intervals overlap.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Barrier;
use tokio::task::JoinSet;
use txretry_core::{Admission, Backoff, RetryPolicy};

use crate::wait::within;

/// How long a database-wide admission waits for a key: long enough never to run out in
/// these tests unless something hangs.
pub const WAIT: Duration = Duration::from_secs(30);

/// Processes in the plan.
pub const PROCESSES: i64 = 2;
/// Tasks (each with a connection) per process.
pub const WORKERS: i64 = 4;
/// Transactions per task.
pub const ROUNDS: i64 = 8;
/// Keys the transactions contend on.
pub const KEYS: i64 = 2;

/// The key (`0..KEYS`) of `worker`'s transaction in `round`.
pub fn key_of(worker: i64, round: i64) -> i64 {
    (worker + round) % KEYS
}

/// A policy of its own (so its own process-local queue) with `admission`; quick retries.
pub fn policy(admission: Admission, attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Constant(Duration::from_millis(1)))
        .admission(admission)
        .build()
        .unwrap()
}

/// Admission per key, across processes, through the database (waiting up to [`WAIT`]).
pub fn shared() -> Admission {
    Admission::per_key().in_database(WAIT)
}

/// Where the two processes meet when an overlap is forced: the first transaction of
/// worker 0 in each process waits, inside the transaction, for the other's.
#[derive(Clone)]
pub struct Meeting(Option<Arc<Barrier>>);

impl Meeting {
    /// A meeting of the [`PROCESSES`] processes if `forced`, else none.
    pub fn new(forced: bool) -> Self {
        Meeting(forced.then(|| Arc::new(Barrier::new(PROCESSES as usize))))
    }

    /// What `worker`'s transaction in `round` does about the meeting.
    pub fn for_round(&self, worker: i64, round: i64) -> Meet {
        Meet {
            barrier: (worker == 0 && round == 0)
                .then(|| self.0.clone())
                .flatten(),
            first: Arc::new(AtomicBool::new(true)),
        }
    }
}

/// One transaction's part in a [`Meeting`]: its first attempt waits for the other
/// process; retries do not.
pub struct Meet {
    barrier: Option<Arc<Barrier>>,
    first: Arc<AtomicBool>,
}

impl Meet {
    /// Waits for the other process, on the first attempt of a transaction that meets it.
    pub async fn meet(&self) {
        if let Some(barrier) = &self.barrier
            && self.first.swap(false, Ordering::SeqCst)
        {
            barrier.wait().await;
        }
    }
}

/// Joins every task, panicking if one did or if they take more than 60 s.
pub async fn join_all(mut tasks: JoinSet<()>) {
    within(async {
        while let Some(joined) = tasks.join_next().await {
            joined.unwrap();
        }
    })
    .await;
}

/// SQL counting the pairs of rows of `table` on one key whose intervals overlap (the same
/// in PostgreSQL and MySQL).
pub fn overlaps_sql(table: &str) -> String {
    format!(
        "SELECT count(*) FROM {table} a JOIN {table} b
         ON a.k = b.k AND a.id < b.id AND a.started < b.ended AND b.started < a.ended"
    )
}

/// Asserts every transaction of the plan committed exactly once (`rows` recorded).
pub fn assert_all_committed(rows: i64) {
    assert_eq!(
        rows,
        PROCESSES * WORKERS * ROUNDS,
        "every transaction committed once"
    );
}

/// Asserts no two transactions on one key ran at once.
pub fn assert_no_overlap(overlaps: i64) {
    assert_eq!(overlaps, 0, "two transactions on one key ran at once");
}

/// Asserts the two processes ran one key at once at least once.
pub fn assert_overlap(overlaps: i64) {
    assert!(overlaps > 0, "the two processes never overlapped");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_cover_every_key() {
        for worker in 0..WORKERS {
            let keys: std::collections::BTreeSet<i64> =
                (0..ROUNDS).map(|round| key_of(worker, round)).collect();
            assert_eq!(keys.len() as i64, KEYS);
        }
    }

    #[test]
    #[should_panic(expected = "ran at once")]
    fn an_overlap_fails_the_no_overlap_check() {
        assert_no_overlap(1);
    }

    #[test]
    #[should_panic(expected = "never overlapped")]
    fn no_overlap_fails_the_overlap_check() {
        assert_overlap(0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_forced_meeting_waits_once_for_the_other_process() {
        let meeting = Meeting::new(true);
        let (a, b) = (meeting.for_round(0, 0), meeting.for_round(0, 0));
        let other = tokio::spawn(async move { b.meet().await });
        within(a.meet()).await;
        // A retry of the same transaction does not wait again.
        within(a.meet()).await;
        within(other).await.unwrap();
        // Other rounds and workers never wait.
        within(meeting.for_round(1, 0).meet()).await;
        within(meeting.for_round(0, 1).meet()).await;
        within(Meeting::new(false).for_round(0, 0).meet()).await;
    }
}
