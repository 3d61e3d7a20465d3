//! Per-key admission through the shared retry loop: attempts naming the same key never
//! overlap; attempts naming different keys do.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use txretry_core::{
    Admission, ContentionKey, KeyEncoder, KeyHash, RetryPolicy, TxFailure, TxOptions,
};

/// Runs `tasks` attempts concurrently through `retry_async!`, each with `options_of(i)`,
/// and returns the highest number of attempts that were in flight at once.
async fn peak_overlap(
    policy: RetryPolicy,
    tasks: usize,
    options_of: fn(usize) -> TxOptions,
) -> usize {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..tasks {
        let (policy, in_flight, peak) = (policy.clone(), in_flight.clone(), peak.clone());
        handles.push(tokio::spawn(async move {
            let options = options_of(i);
            let mut state = txretry_core::RetryState::new(&policy, &options);
            let result: Result<(), txretry_core::TxError<std::io::Error>> =
                txretry_core::retry_async!(state, admission = &options, async {
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
    assert_eq!(
        peak_overlap(policy, 8, |_| TxOptions::new().contends_on(7)).await,
        1
    );
}

#[tokio::test(start_paused = true)]
async fn attempts_on_different_keys_run_together() {
    let policy = RetryPolicy::builder()
        .admission(Admission::per_key())
        .build()
        .unwrap();
    assert!(peak_overlap(policy, 8, |i| TxOptions::new().contends_on(i)).await > 1);
}

#[tokio::test(start_paused = true)]
async fn without_admission_the_same_key_overlaps() {
    assert!(
        peak_overlap(RetryPolicy::default(), 8, |_| TxOptions::new()
            .contends_on(7))
        .await
            > 1
    );
}

fn admitting() -> RetryPolicy {
    RetryPolicy::builder()
        .admission(Admission::per_key())
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn equal_values_of_different_types_are_one_key() {
    let options = |i: usize| match i % 4 {
        0 => TxOptions::new().contends_on(42_i32),
        1 => TxOptions::new().contends_on(42_i64),
        2 => TxOptions::new().contends_on(42_u8),
        _ => TxOptions::new().contends_on(42_usize),
    };
    assert_eq!(peak_overlap(admitting(), 8, options).await, 1);
}

#[tokio::test(start_paused = true)]
async fn named_keys_are_one_key_whatever_the_string_type() {
    let options = |i: usize| match i % 3 {
        0 => TxOptions::new().contends_on(("account", 42)),
        1 => TxOptions::new().contends_on((String::from("account"), 42_i64)),
        _ => TxOptions::new().contends_on((Arc::<str>::from("account"), 42_u64)),
    };
    assert_eq!(peak_overlap(admitting(), 6, options).await, 1);
}

#[tokio::test(start_paused = true)]
async fn different_names_or_ids_are_different_keys() {
    let options = |i: usize| match i % 4 {
        0 => TxOptions::new().contends_on(("account", 42)),
        1 => TxOptions::new().contends_on(("account", 43)),
        2 => TxOptions::new().contends_on(("tenant", 42)),
        _ => TxOptions::new().contends_on(42),
    };
    assert_eq!(peak_overlap(admitting(), 4, options).await, 4);
}

/// A key type of the caller's own, written as a key that already exists.
struct AccountId(i64);

impl ContentionKey for AccountId {
    fn write_key(&self, out: &mut KeyEncoder) {
        ("account", self.0).write_key(out);
    }
}

#[tokio::test(start_paused = true)]
async fn a_key_type_of_your_own_coordinates_with_its_encoding() {
    let options = |i: usize| {
        if i.is_multiple_of(2) {
            TxOptions::new().contends_on(AccountId(42))
        } else {
            TxOptions::new().contends_on(("account", 42))
        }
    };
    assert_eq!(peak_overlap(admitting(), 4, options).await, 1);
}

/// One transaction through `retry_async!` that holds its keys for `hold`.
async fn transaction(policy: &RetryPolicy, options: &TxOptions, hold: Duration) {
    let mut state = txretry_core::RetryState::new(policy, options);
    let result: Result<(), txretry_core::TxError<std::io::Error>> =
        txretry_core::retry_async!(state, admission = options, async {
            tokio::time::sleep(hold).await;
            Ok::<(), TxFailure<std::io::Error>>(())
        });
    result.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_transaction_cancelled_waiting_for_its_second_key_gives_the_first_back() {
    let admission = Admission::per_key();
    let policy = RetryPolicy::builder()
        .admission(admission.clone())
        .build()
        .unwrap();
    // Keys are taken in the order of their hashes: `first`, then `second`.
    let (first, second) = if KeyHash::of(1) < KeyHash::of(2) {
        (1, 2)
    } else {
        (2, 1)
    };
    let both = TxOptions::new().contends_on(first).contends_on(second);

    // One transaction holds `second` for a minute...
    let holder = tokio::spawn({
        let policy = policy.clone();
        let options = TxOptions::new().contends_on(second);
        async move { transaction(&policy, &options, Duration::from_secs(60)).await }
    });
    tokio::task::yield_now().await;
    // ...so one on both keys takes `first` and waits for `second` until it is cancelled.
    let waiting = tokio::time::timeout(
        Duration::from_secs(1),
        transaction(&policy, &both, Duration::ZERO),
    )
    .await;
    assert!(waiting.is_err(), "it waited for the second key");

    // `first` is free at once.
    let started = Instant::now();
    transaction(
        &policy,
        &TxOptions::new().contends_on(first),
        Duration::ZERO,
    )
    .await;
    assert_eq!(started.elapsed(), Duration::ZERO);

    // Both are free once the holder is done.
    holder.await.unwrap();
    let started = Instant::now();
    transaction(&policy, &both, Duration::ZERO).await;
    assert_eq!(started.elapsed(), Duration::ZERO);
    // And nothing is left behind.
    assert_eq!(format!("{admission:?}"), "Admission { keys_in_use: 0 }");
}
