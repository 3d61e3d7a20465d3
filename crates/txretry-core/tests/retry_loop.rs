//! The retry loop's behaviour, under paused tokio time (no real sleeping).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use txretry_core::{AsError, Backoff, Code, RetryEvent, RetryPolicy, TransientKind};

#[derive(Debug, thiserror::Error)]
enum AppError {
    #[error("Deadlock found when trying to get lock; try restarting transaction")]
    Deadlock,
    #[error("order {0} not found")]
    NotFound(u32),
}

/// What an `on_retry` hook saw, copied out of the borrowed event.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    attempt: u32,
    max_attempts: u32,
    delay: Duration,
    kind: Option<TransientKind>,
    code: Option<Code>,
    error: String,
}

fn recording(policy: txretry_core::RetryPolicyBuilder) -> (RetryPolicy, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let policy = policy
        .on_retry(move |e: &RetryEvent<'_>| {
            sink.lock().unwrap().push(Seen {
                attempt: e.attempt,
                max_attempts: e.max_attempts,
                delay: e.delay,
                kind: e.kind(),
                code: e.code,
                error: e.error.to_string(),
            })
        })
        .build()
        .unwrap();
    (policy, seen)
}

/// Runs `policy`'s async loop over `attempt`, which is told its attempt's number (from 1);
/// returns what the loop returned and how many attempts it made.
async fn run_counting<T, E: AsError<Via>, Via>(
    policy: &RetryPolicy,
    mut attempt: impl FnMut(u32) -> Result<T, E>,
) -> (Result<T, E>, u32) {
    let mut calls = 0;
    let result = policy
        .run(async || {
            calls += 1;
            attempt(calls)
        })
        .await;
    (result, calls)
}

#[tokio::test(start_paused = true)]
async fn transient_then_success_runs_twice_and_fires_one_event_with_attempt_1() {
    let (policy, seen) = recording(RetryPolicy::builder());
    let (result, calls) = run_counting(&policy, |n| {
        if n == 1 {
            Err(AppError::Deadlock)
        } else {
            Ok("done")
        }
    })
    .await;
    assert_eq!(result.unwrap(), "done");
    assert_eq!(calls, 2);
    let seen = seen.lock().unwrap();
    assert_eq!(
        *seen,
        vec![Seen {
            attempt: 1,
            max_attempts: 2,
            delay: Duration::from_millis(150),
            kind: Some(TransientKind::Deadlock),
            code: Some(Code::Message("Deadlock found when trying to get lock")),
            error: AppError::Deadlock.to_string(),
        }]
    );
}

#[tokio::test(start_paused = true)]
async fn business_error_runs_once_and_is_returned_unchanged() {
    let (policy, seen) = recording(RetryPolicy::builder().max_attempts(5));
    let (result, calls) = run_counting(&policy, |_| Err::<(), _>(AppError::NotFound(17))).await;
    assert!(matches!(result, Err(AppError::NotFound(17))));
    assert_eq!(calls, 1);
    assert!(seen.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn persistent_transient_error_with_3_attempts_runs_3_times_and_returns_it() {
    let (policy, seen) = recording(RetryPolicy::builder().max_attempts(3));
    let (result, calls) = run_counting(&policy, |_| Err::<(), _>(AppError::Deadlock)).await;
    assert!(matches!(result, Err(AppError::Deadlock)));
    assert_eq!(calls, 3);
    let attempts: Vec<u32> = seen.lock().unwrap().iter().map(|s| s.attempt).collect();
    assert_eq!(attempts, [1, 2]);
}

#[tokio::test(start_paused = true)]
async fn disabled_runs_once() {
    let (result, calls) = run_counting(&RetryPolicy::disabled(), |_| {
        Err::<(), _>(AppError::Deadlock)
    })
    .await;
    assert!(matches!(result, Err(AppError::Deadlock)));
    assert_eq!(calls, 1);
}

#[tokio::test(start_paused = true)]
async fn default_linear_backoff_waits_exactly_150ms_then_300ms() {
    let policy = RetryPolicy::builder().max_attempts(3).build().unwrap();
    let start = tokio::time::Instant::now();
    let mut started_at = Vec::new();
    let _: Result<(), AppError> = policy
        .run(async || {
            started_at.push(start.elapsed());
            Err(AppError::Deadlock)
        })
        .await;
    assert_eq!(
        started_at,
        [
            Duration::ZERO,
            Duration::from_millis(150),
            Duration::from_millis(450)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn max_elapsed_stops_before_a_wait_that_would_overrun_it() {
    let policy = RetryPolicy::builder()
        .max_attempts(10)
        .backoff(Backoff::Constant(Duration::from_millis(100)))
        .max_elapsed(Duration::from_millis(250))
        .build()
        .unwrap();
    let (_, calls) = run_counting(&policy, |_| Err::<(), _>(AppError::Deadlock)).await;
    // Starts at 0, 100, 200; the wait to 300 would overrun 250.
    assert_eq!(calls, 3);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_hook_does_not_break_the_loop() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .on_retry(|_| panic!("hook bug"))
        .build()
        .unwrap();
    let (result, calls) = run_counting(&policy, |n| {
        if n < 3 {
            Err(AppError::Deadlock)
        } else {
            Ok(())
        }
    })
    .await;
    assert!(result.is_ok());
    assert_eq!(calls, 3);
}

#[tokio::test(start_paused = true)]
async fn kinds_outside_retry_on_are_not_retried() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .retry_on([TransientKind::SerializationFailure])
        .build()
        .unwrap();
    let (_, calls) = run_counting(&policy, |_| Err::<(), _>(AppError::Deadlock)).await;
    assert_eq!(calls, 1);
}

#[tokio::test(start_paused = true)]
async fn anyhow_and_boxed_errors_are_classified_and_returned_unchanged() {
    let policy = RetryPolicy::builder().max_attempts(2).build().unwrap();
    let (r, calls) = run_counting(&policy, |_| {
        Err::<(), anyhow::Error>(anyhow::anyhow!("deadlock detected"))
    })
    .await;
    assert_eq!(r.unwrap_err().to_string(), "deadlock detected");
    assert_eq!(calls, 2);

    let (r, calls) = run_counting(&policy, |_| {
        Err::<(), Box<dyn std::error::Error + Send + Sync>>("Lock wait timeout exceeded".into())
    })
    .await;
    assert_eq!(r.unwrap_err().to_string(), "Lock wait timeout exceeded");
    assert_eq!(calls, 2);
}

/// Captures are moved into the closure: rustc cannot yet prove `Send` for an async closure
/// that borrows from the spawned future (rust-lang/rust#100013), whatever the callee.
#[tokio::test(start_paused = true)]
async fn the_run_future_is_send_and_can_be_spawned() {
    let policy = RetryPolicy::default();
    let task = tokio::spawn(async move {
        let mut calls = 0u32;
        policy
            .run(async move || {
                calls += 1;
                tokio::task::yield_now().await;
                if calls == 1 {
                    Err(AppError::Deadlock)
                } else {
                    Ok(calls)
                }
            })
            .await
    });
    assert_eq!(task.await.unwrap().unwrap(), 2);
}

#[test]
fn async_and_blocking_loops_make_the_same_attempts_for_the_same_errors() {
    type Script = Vec<Result<u8, AppError>>;
    let scripts: Vec<Script> = vec![
        vec![Ok(1)],
        vec![Err(AppError::Deadlock), Ok(2)],
        vec![
            Err(AppError::Deadlock),
            Err(AppError::Deadlock),
            Err(AppError::Deadlock),
            Ok(3),
        ],
        vec![Err(AppError::NotFound(1)), Ok(4)],
        vec![Err(AppError::Deadlock), Err(AppError::NotFound(2)), Ok(5)],
        (0..10).map(|_| Err(AppError::Deadlock)).collect(),
    ];
    let policy = RetryPolicy::builder()
        .max_attempts(4)
        .backoff(Backoff::Constant(Duration::from_micros(1)))
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    for script in scripts {
        let replay = |script: &Script, i: usize| match &script[i] {
            Ok(v) => Ok(*v),
            Err(AppError::Deadlock) => Err(AppError::Deadlock),
            Err(AppError::NotFound(n)) => Err(AppError::NotFound(*n)),
        };
        let mut blocking_calls = 0;
        let blocking = policy.run_blocking(|| {
            blocking_calls += 1;
            replay(&script, blocking_calls - 1)
        });
        let mut async_calls = 0;
        let asynchronous = rt.block_on(policy.run(async || {
            async_calls += 1;
            replay(&script, async_calls - 1)
        }));
        assert_eq!(blocking_calls, async_calls, "{script:?}");
        assert_eq!(format!("{blocking:?}"), format!("{asynchronous:?}"));
    }
}

/// When retries run out, one give-up event carries every attempt's verdict; async and
/// blocking loops report the same.
#[tokio::test(start_paused = true)]
async fn running_out_of_attempts_fires_one_give_up_event_with_the_history() {
    use txretry_core::{GiveUpEvent, StopReason, Verdict};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .on_give_up(move |e: &GiveUpEvent<'_>| {
            let history: Vec<Verdict> = e.outcome.history().iter().map(|a| a.verdict).collect();
            sink.lock().unwrap().push((
                e.outcome.attempts(),
                e.outcome.stop_reason(),
                history,
                e.error.to_string(),
            ));
        })
        .build()
        .unwrap();
    let deadlock = Verdict::Transient(TransientKind::Deadlock);
    let expected = (
        3,
        StopReason::AttemptsExhausted,
        vec![deadlock; 3],
        AppError::Deadlock.to_string(),
    );

    let r: Result<(), AppError> = policy.run(async || Err(AppError::Deadlock)).await;
    assert!(matches!(r, Err(AppError::Deadlock)));
    let r: Result<(), AppError> = policy.run_blocking(|| Err(AppError::Deadlock));
    assert!(matches!(r, Err(AppError::Deadlock)));
    assert_eq!(*seen.lock().unwrap(), vec![expected.clone(), expected]);

    // A business error is an ordinary outcome: no give-up event.
    let r: Result<(), AppError> = policy.run(async || Err(AppError::NotFound(7))).await;
    assert!(matches!(r, Err(AppError::NotFound(7))));
    assert_eq!(seen.lock().unwrap().len(), 2);
}

/// The give-up event lists every attempt with its error's text, in `outcome.history()`'s
/// order; a scope records every attempt of every loop in it, for the outer layer to take.
#[tokio::test(start_paused = true)]
async fn the_give_up_event_and_the_scope_list_every_attempt_with_its_error() {
    use txretry_core::{GiveUpEvent, Phase, RecordedAttempt, RetryBudget, Verdict};
    let seen: Arc<Mutex<Vec<Vec<RecordedAttempt>>>> = Arc::default();
    let sink = seen.clone();
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .on_give_up(move |e: &GiveUpEvent<'_>| {
            let listed: Vec<_> = e.attempts.iter().map(|a| a.failure).collect();
            assert_eq!(listed, e.outcome.history());
            sink.lock().unwrap().push(e.attempts.to_vec());
        })
        .build()
        .unwrap();
    let scope = RetryBudget::for_policy(&policy);
    let scoped = policy.with_budget(scope.clone());

    // Fails twice (two texts), then succeeds: recorded in the scope, no give-up.
    let (r, _) = run_counting(&scoped, |n| {
        if n < 3 {
            Err(AppError::Deadlock)
        } else {
            Ok(())
        }
    })
    .await;
    assert!(r.is_ok());
    // The budget is spent: the next loop's first attempt fails and gives up.
    let r: Result<(), AppError> = scoped.run(async || Err(AppError::Deadlock)).await;
    assert!(r.is_err());

    let deadlock = Verdict::Transient(TransientKind::Deadlock);
    let recorded = scope.take_attempts();
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    for attempt in &recorded {
        assert_eq!(attempt.failure.verdict, deadlock);
        assert_eq!(attempt.failure.phase, Phase::Body);
        assert_eq!(attempt.error, AppError::Deadlock.to_string());
    }
    assert!(scope.take_attempts().is_empty(), "taken");
    // The second loop's give-up lists its own one attempt, with its text.
    assert_eq!(*seen.lock().unwrap(), vec![recorded[2..].to_vec()]);

    // A loop that gives up on its own lists its three, each with its error's text.
    seen.lock().unwrap().clear();
    let (r, _) = run_counting(&policy, |n| {
        Err::<(), _>(std::io::Error::other(format!("deadlock detected ({n})")))
    })
    .await;
    assert!(r.is_err());
    let texts: Vec<Vec<String>> = (seen.lock().unwrap().iter())
        .map(|attempts| attempts.iter().map(|a| a.error.clone()).collect())
        .collect();
    assert_eq!(
        texts,
        [[
            "deadlock detected (1)",
            "deadlock detected (2)",
            "deadlock detected (3)"
        ]]
    );
}

/// A runtime built without its time driver (no `enable_time`): a loop whose waits are zero
/// needs no timer, where tokio's own sleep panicked.
#[test]
fn a_loop_that_waits_zero_runs_in_a_runtime_without_a_timer() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let policy = RetryPolicy::builder()
        .backoff(Backoff::None)
        .max_attempts(3)
        .build()
        .unwrap();
    let mut runs = 0;
    let out = runtime.block_on(policy.run(async || {
        runs += 1;
        if runs < 3 {
            Err(std::io::Error::other("deadlock detected"))
        } else {
            Ok(runs)
        }
    }));
    assert_eq!(out.unwrap(), 3);
}

/// Each recorded attempt keeps at most 4 KiB of its error's text, cut at a character: a
/// loop keeps one text per attempt, and a 1 MB message over many attempts held them all.
#[test]
fn a_recorded_attempt_keeps_the_first_4_kib_of_a_long_message() {
    use txretry_core::GiveUpEvent;
    // "é" is two bytes: the 4 KiB limit falls inside one after "deadlock detected ".
    let long = format!("deadlock detected {}", "é".repeat(1 << 19));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(Backoff::None)
        .on_give_up(move |e: &GiveUpEvent<'_>| {
            let texts = e.attempts.iter().map(|a| a.error.clone());
            sink.lock().unwrap().extend(texts);
        })
        .build()
        .unwrap();
    let short = std::io::Error::other("deadlock detected");
    let _ = policy.run_blocking(|| Err::<(), _>(std::io::Error::other(long.clone())));
    let _ = policy.run_blocking(|| Err::<(), _>(std::io::Error::other(short.to_string())));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 6);
    for text in &seen[..3] {
        assert!(text.len() <= 4096 + '…'.len_utf8(), "{}", text.len());
        assert!(text.starts_with("deadlock detected é") && text.ends_with("é…"));
    }
    for text in &seen[3..] {
        assert_eq!(text, "deadlock detected", "a short message is kept whole");
    }
}
