//! Per-key admission through the shared retry loop: attempts naming the same key never
//! overlap; attempts naming different keys do.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use txretry_core::{Admission, RetryPolicy, TxFailure, TxOptions};

/// Runs `tasks` attempts concurrently through `retry_async!`, each naming `key_of(i)`,
/// and returns the highest number of attempts that were in flight at once.
async fn peak_overlap(policy: RetryPolicy, tasks: usize, key_of: fn(usize) -> u32) -> usize {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..tasks {
        let (policy, in_flight, peak) = (policy.clone(), in_flight.clone(), peak.clone());
        handles.push(tokio::spawn(async move {
            let options = TxOptions::new().contends_on(key_of(i));
            let result: Result<(), std::io::Error> =
                txretry_core::retry_async!(&policy, options = &options, async {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    Ok::<(), TxFailure<std::io::Error>>(())
                });
            result.unwrap();
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    peak.load(Ordering::SeqCst)
}

#[tokio::test(start_paused = true)]
async fn attempts_on_one_key_take_turns() {
    let policy = RetryPolicy::builder()
        .admission(Admission::per_key())
        .build()
        .unwrap();
    assert_eq!(peak_overlap(policy, 8, |_| 7).await, 1);
}

#[tokio::test(start_paused = true)]
async fn attempts_on_different_keys_run_together() {
    let policy = RetryPolicy::builder()
        .admission(Admission::per_key())
        .build()
        .unwrap();
    assert!(peak_overlap(policy, 8, |i| i as u32).await > 1);
}

#[tokio::test(start_paused = true)]
async fn without_admission_the_same_key_overlaps() {
    assert!(peak_overlap(RetryPolicy::default(), 8, |_| 7).await > 1);
}
