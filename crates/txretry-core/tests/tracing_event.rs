//! The retry event also goes to `tracing`, with the fields the hook sees.

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
        let mut fields = Fields(Vec::new());
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn each_retry_emits_one_tracing_event_with_attempt_kind_code_and_error() {
    let recorder = Recorder::default();
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .backoff(txretry_core::Backoff::None)
        .build()
        .unwrap();
    let mut calls = 0;
    tracing::subscriber::with_default(recorder.clone(), || {
        let _: Result<(), std::io::Error> = policy.run_blocking(|| {
            calls += 1;
            Err(std::io::Error::other(
                "Deadlock found when trying to get lock",
            ))
        });
    });
    assert_eq!(calls, 3);
    let events = recorder.0.lock().unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    for (i, fields) in events.iter().enumerate() {
        let has = |f: &str| fields.iter().any(|x| x == f);
        assert!(has(&format!("attempt={}", i + 1)), "{fields:?}");
        assert!(has("max_attempts=3"), "{fields:?}");
        assert!(has("delay_ms=0"), "{fields:?}");
        assert!(has("kind=deadlock"), "{fields:?}");
        assert!(
            fields
                .iter()
                .any(|x| x.starts_with("code=") && x.contains("deadlock")),
            "{fields:?}"
        );
        assert!(
            fields
                .iter()
                .any(|x| x.starts_with("error=") && x.contains("Deadlock found")),
            "{fields:?}"
        );
    }
}
