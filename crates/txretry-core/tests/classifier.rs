//! The classifier's rules: typed codes are authoritative, the cause walk has a depth,
//! composition keeps the defaults you keep. A stand-in driver error registers its codes
//! the way an adapter does (hand-built values are fine here; the adapters' tests provoke
//! real ones).

use std::error::Error;
use std::fmt;

use txretry_core::{
    Classification, Classifier, Code, MessageFallback, Profile, RetryPolicy, SqlState,
    TransientKind, Verdict, classify,
};

/// A stand-in for a driver's typed database error.
#[derive(Debug)]
struct DbError {
    sqlstate: &'static str,
    message: &'static str,
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message)
    }
}
impl Error for DbError {}

fn extract(error: &(dyn Error + 'static)) -> Option<Code> {
    let e = error.downcast_ref::<DbError>()?;
    SqlState::new(e.sqlstate).map(Code::SqlState)
}
txretry_core::register_extractor!(extract);

fn db(sqlstate: &'static str, message: &'static str) -> DbError {
    DbError { sqlstate, message }
}

#[derive(Debug, thiserror::Error)]
enum ServiceError {
    #[error("database failed")]
    Db(#[source] DbError),
    #[error("repository failed")]
    Repo(#[source] Box<ServiceError>),
}

#[test]
fn a_typed_code_is_classified_by_the_table() {
    let c = classify(&db("40P01", "deadlock detected"));
    assert_eq!(c.verdict, Verdict::Transient(TransientKind::Deadlock));
    assert_eq!(c.code, Some(Code::SqlState(SqlState::from_static("40P01"))));
}

#[test]
fn a_typed_code_beats_the_message() {
    // RAISE EXCEPTION 'deadlock in order %' arrives with SQLSTATE P0001.
    let c = classify(&db("P0001", "deadlock in order 17"));
    assert_eq!(c.verdict, Verdict::Permanent);
    assert_eq!(c.code, Some(Code::SqlState(SqlState::from_static("P0001"))));
}

#[test]
fn a_typed_code_at_depth_one_beats_a_message_at_depth_zero() {
    #[derive(Debug, thiserror::Error)]
    #[error("deadlock while saving order")]
    struct Wrapper(#[source] DbError);
    let c = classify(&Wrapper(db("23505", "duplicate key")));
    assert_eq!(c.verdict, Verdict::Permanent);
}

#[test]
fn thiserror_wrapper_is_classified_through_one_level_but_not_two() {
    let one = ServiceError::Db(db("40001", "could not serialize access"));
    assert_eq!(
        classify(&one).verdict,
        Verdict::Transient(TransientKind::SerializationFailure)
    );

    let two = ServiceError::Repo(Box::new(ServiceError::Db(db(
        "40001",
        "could not serialize access",
    ))));
    assert_eq!(classify(&two).verdict, Verdict::Permanent);
    let deeper = Classifier::default().depth(2);
    assert_eq!(
        deeper.classify(&two).verdict,
        Verdict::Transient(TransientKind::SerializationFailure)
    );
}

#[test]
fn anyhow_context_is_classified_through_one_level_but_not_two() {
    let one = anyhow::Error::new(db("40P01", "deadlock detected")).context("saving order");
    let as_dyn: &(dyn Error + 'static) = one.as_ref();
    assert_eq!(
        classify(as_dyn).verdict,
        Verdict::Transient(TransientKind::Deadlock)
    );

    let two = anyhow::Error::new(db("40P01", "x"))
        .context("saving order")
        .context("handling request");
    let as_dyn: &(dyn Error + 'static) = two.as_ref();
    assert_eq!(classify(as_dyn).verdict, Verdict::Permanent);
    assert_eq!(
        Classifier::default().depth(2).classify(as_dyn).verdict,
        Verdict::Transient(TransientKind::Deadlock)
    );
}

/// What the classifier logs (target `txretry`) while `f` runs.
fn logged(f: impl FnOnce()) -> String {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let bytes = buffer.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

/// A code the classifier does not reach would have been retried: it says so, with the
/// code and how deep it was; a deeper code that is permanent anyway, or one within the
/// depth, logs nothing.
#[test]
fn a_retryable_code_beyond_depth_is_judged_permanent_with_a_warning() {
    let two = anyhow::Error::new(db("40P01", "deadlock detected"))
        .context("saving order")
        .context("handling request");
    let as_dyn: &(dyn Error + 'static) = two.as_ref();
    let log = logged(|| assert_eq!(classify(as_dyn).verdict, Verdict::Permanent));
    assert!(log.contains("WARN"), "{log}");
    assert!(log.contains("code=SQLSTATE 40P01"), "{log}");
    assert!(log.contains("level=2 depth=1"), "{log}");
    assert!(log.contains("Classifier::depth"), "{log}");

    let unique = anyhow::Error::new(db("23505", "duplicate key"))
        .context("saving order")
        .context("handling request");
    let as_dyn: &(dyn Error + 'static) = unique.as_ref();
    assert_eq!(
        logged(|| {
            let _ = classify(as_dyn);
        }),
        ""
    );
    let one = anyhow::Error::new(db("40P01", "deadlock detected")).context("saving order");
    let as_dyn: &(dyn Error + 'static) = one.as_ref();
    assert_eq!(
        logged(|| {
            let _ = classify(as_dyn);
        }),
        ""
    );
}

#[test]
fn a_source_that_returns_itself_terminates_as_permanent() {
    #[derive(Debug)]
    struct Loop;
    impl fmt::Display for Loop {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("loop")
        }
    }
    impl Error for Loop {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self)
        }
    }
    assert_eq!(
        Classifier::default().depth(usize::MAX).classify(&Loop),
        Classification::PERMANENT
    );
}

#[test]
fn message_fallback_is_used_only_without_a_typed_code() {
    let plain = std::io::Error::other("Lock wait timeout exceeded; try restarting transaction");
    let c = classify(&plain);
    assert_eq!(c.verdict, Verdict::Transient(TransientKind::LockTimeout));
    assert_eq!(c.code, Some(Code::Message("Lock wait timeout exceeded")));
    assert_eq!(
        Classifier::default()
            .message_fallback(MessageFallback::Off)
            .classify(&plain)
            .verdict,
        Verdict::Permanent
    );
}

#[test]
fn widening_with_a_code_keeps_the_defaults() {
    let c = Classifier::default().with_code(
        Code::SqlState(SqlState::from_static("P0001")),
        Verdict::Transient(TransientKind::Busy),
    );
    assert_eq!(
        c.classify(&db("P0001", "x")).verdict,
        Verdict::Transient(TransientKind::Busy)
    );
    assert_eq!(
        c.classify(&db("40P01", "x")).verdict,
        Verdict::Transient(TransientKind::Deadlock)
    );
}

#[test]
fn widening_with_a_closure_falls_through_on_none() {
    let c = Classifier::default().with_fn(|e| {
        e.to_string()
            .contains("try later")
            .then_some(Classification::new(
                Verdict::Transient(TransientKind::Busy),
                None,
            ))
    });
    assert_eq!(
        c.classify(&std::io::Error::other("try later")).verdict,
        Verdict::Transient(TransientKind::Busy)
    );
    assert_eq!(
        c.classify(&db("40001", "x")).verdict,
        Verdict::Transient(TransientKind::SerializationFailure)
    );
    assert_eq!(
        c.classify(&std::io::Error::other("nope")).verdict,
        Verdict::Permanent
    );
}

#[test]
fn user_text_that_mentions_a_deadlock_is_permanent() {
    for text in [
        "refund 17 refused: customer reports a deadlock at checkout",
        "product Deadlock Deluxe is out of stock",
    ] {
        let business = anyhow::anyhow!("{text}");
        let as_dyn: &(dyn Error + 'static) = business.as_ref();
        assert_eq!(classify(as_dyn), Classification::PERMANENT, "{text}");
    }
}

#[test]
fn the_loose_patterns_are_an_explicit_opt_in() {
    let business = std::io::Error::other("customer reports a deadlock at checkout");
    let loose = Classifier::default().message_fallback(MessageFallback::Loose);
    assert_eq!(
        loose.classify(&business),
        Classification::new(
            Verdict::Transient(TransientKind::Deadlock),
            Some(Code::Message("deadlock"))
        )
    );
}

#[test]
fn a_phrase_of_the_message_fallback_can_be_overridden_like_a_code() {
    let phrase = Code::Message("deadlock detected");
    let err = std::io::Error::other("deadlock detected");
    let defaults = Classifier::default();
    // What `verdict_for` says of a phrase is what `classify` does with it.
    assert_eq!(
        defaults.verdict_for(phrase),
        Some(Verdict::Transient(TransientKind::Deadlock))
    );
    assert_eq!(
        defaults.classify(&err).verdict,
        defaults.verdict_for(phrase).unwrap()
    );
    let off = Classifier::default().message_fallback(MessageFallback::Off);
    assert_eq!(off.verdict_for(phrase), None);
    assert_eq!(
        Classifier::default().verdict_for(Code::Message("deadlock")),
        None,
        "a loose pattern only when opted in"
    );
    // Overridden: never retried, and still named by its phrase.
    let overridden = Classifier::default().with_code(phrase, Verdict::Permanent);
    assert_eq!(
        overridden.classify(&err),
        Classification::new(Verdict::Permanent, Some(phrase))
    );
    let policy = RetryPolicy::builder()
        .classifier(overridden)
        .max_attempts(3)
        .build()
        .unwrap();
    let mut runs = 0;
    let _ = policy.run_blocking(|| {
        runs += 1;
        Err::<(), _>(std::io::Error::other("deadlock detected"))
    });
    assert_eq!(runs, 1);
}

#[test]
fn a_typed_code_beyond_depth_blocks_the_message_fallback() {
    // RAISE EXCEPTION 'deadlock detected in order 17' (P0001), wrapped twice: the code is
    // past the default depth, so it does not decide, but the message must not either.
    let raised = ServiceError::Repo(Box::new(ServiceError::Db(db(
        "P0001",
        "deadlock detected in order 17",
    ))));
    #[derive(Debug, thiserror::Error)]
    #[error("deadlock detected while saving order: {0}")]
    struct Loud(#[source] ServiceError);
    let c = classify(&Loud(raised));
    assert_eq!(c, Classification::PERMANENT);
}

#[test]
fn replacing_with_empty_recognises_only_what_is_added() {
    let c = Classifier::empty().with_profile(Profile::CockroachDb);
    assert_eq!(
        c.classify(&db("40001", "x")).verdict,
        Verdict::Transient(TransientKind::SerializationFailure)
    );
    assert_eq!(c.classify(&db("40003", "x")).verdict, Verdict::Ambiguous);
    assert_eq!(
        c.classify(&db("40P01", "deadlock")).verdict,
        Verdict::Permanent
    );
}

#[test]
fn a_user_classifier_can_fall_back_to_the_default() {
    let c = Classifier::from_fn(|e| {
        if e.to_string() == "flaky" {
            Some(Classification::new(
                Verdict::Transient(TransientKind::Connection),
                None,
            ))
        } else {
            Some(classify(e))
        }
    });
    assert_eq!(
        c.classify(&std::io::Error::other("flaky")).verdict,
        Verdict::Transient(TransientKind::Connection)
    );
    assert_eq!(
        c.classify(&db("40P01", "x")).verdict,
        Verdict::Transient(TransientKind::Deadlock)
    );
}

#[test]
fn the_policy_classifies_with_its_own_classifier() {
    let policy = RetryPolicy::builder()
        .classifier(Classifier::default().with_code(
            Code::SqlState(SqlState::from_static("40001")),
            Verdict::Permanent,
        ))
        .build()
        .unwrap();
    assert_eq!(
        policy.classify(&db("40001", "x")).verdict,
        Verdict::Permanent
    );
    assert_eq!(
        RetryPolicy::default().classify(&db("40001", "x")).verdict,
        Verdict::Transient(TransientKind::SerializationFailure)
    );
}

#[test]
fn broken_connection_io_errors_are_connection() {
    let e = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    assert_eq!(
        classify(&e),
        Classification::new(
            Verdict::Transient(TransientKind::Connection),
            Some(Code::Driver("io"))
        )
    );
    let not_found = std::io::Error::from(std::io::ErrorKind::NotFound);
    assert_eq!(classify(&not_found).verdict, Verdict::Permanent);
}
