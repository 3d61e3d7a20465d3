//! The retry and give-up events also go to `tracing`, with the fields the hooks see: each
//! retry at debug level (a contended service retries often), the give-up once at warn.

use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};
use txretry_core::RetryPolicy;

/// Records the fields of every `txretry` event as `name=value` strings.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Vec<String>>>>);

struct Fields(Vec<String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push(format!("{}={value}", field.name()));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push(format!("{}={value}", field.name()));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "txretry"
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields(vec![format!("level={}", event.metadata().level())]);
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn run_recorded(policy: &RetryPolicy, message: &'static str) -> (u32, Vec<Vec<String>>) {
    let recorder = Recorder::default();
    let mut calls = 0;
    tracing::subscriber::with_default(recorder.clone(), || {
        let _: Result<(), std::io::Error> = policy.run_blocking(|| {
            calls += 1;
            Err(std::io::Error::other(message))
        });
    });
    let events = recorder.0.lock().unwrap().clone();
    (calls, events)
}

#[test]
fn each_retry_emits_one_debug_event_and_the_give_up_one_warn_event() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(txretry_core::Backoff::None)
        .build()
        .unwrap();
    let (calls, events) = run_recorded(&policy, "Deadlock found when trying to get lock");
    assert_eq!(calls, 3);
    assert_eq!(events.len(), 3, "{events:?}");
    for (i, fields) in events[..2].iter().enumerate() {
        let has = |f: &str| fields.iter().any(|x| x == f);
        assert!(has("level=DEBUG"), "{fields:?}");
        assert!(has(&format!("attempt={}", i + 1)), "{fields:?}");
        assert!(has("max_attempts=3"), "{fields:?}");
        assert!(has("delay_ms=0"), "{fields:?}");
        assert!(has("kind=deadlock"), "{fields:?}");
        assert!(has("phase=body"), "{fields:?}");
        assert!(
            fields
                .iter()
                .any(|x| x.starts_with("code=") && x.contains("Deadlock found")),
            "{fields:?}"
        );
        assert!(
            fields
                .iter()
                .any(|x| x.starts_with("error=") && x.contains("Deadlock found")),
            "{fields:?}"
        );
    }
    let give_up = &events[2];
    let has = |f: &str| give_up.iter().any(|x| x == f);
    assert!(has("level=WARN"), "{give_up:?}");
    assert!(has("attempts=3"), "{give_up:?}");
    assert!(has("kind=deadlock"), "{give_up:?}");
    assert!(has("reason=AttemptsExhausted"), "{give_up:?}");
}

#[test]
fn a_business_error_emits_nothing() {
    let (calls, events) = run_recorded(&RetryPolicy::default(), "order 17 not found");
    assert_eq!(calls, 1);
    assert!(events.is_empty(), "{events:?}");
}
