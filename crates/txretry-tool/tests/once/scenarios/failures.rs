//! Calls that fail, and what is recorded of them: a business error and a permanent database
//! error are (and replayed), a transient failure is retried and never recorded, a timed-out
//! attempt is run again, and a call that could not be confirmed says a repeat is safe.

use std::time::Duration;

use serde_json::Value;
use txretry_core::Verdict;
use txretry_tool::FailureKind;

use super::{Setup, count, drop_tables, failed, toolbox};
use crate::common::*;
use crate::driver::OnceDriver;

pub async fn a_business_error_is_recorded_its_writes_rolled_back_and_replayed<D: OnceDriver>(
    s: &Setup<D>,
) {
    let work = Work::new(&s.t, Step::Place);
    let toolbox = toolbox(3, s.tool("place", &work));

    let first = call(&toolbox, "place", -5, "call-b").await;
    let failure = failed(&first);
    assert_eq!(failure.kind(), FailureKind::Business);
    assert_eq!(failure.to_string(), "place: there is no item -5");
    assert_eq!(failure.attempts().len(), 1);
    assert_eq!(failure.attempts()[0].verdict(), Verdict::Permanent);

    assert!(!failure.replayed());
    let again = call(&toolbox, "place", -5, "call-b").await;
    assert_eq!(answer(&again), answer(&first), "the same business error");
    // Said to be the earlier call's: what changed since does not change it.
    assert!(failed(&again).replayed());
    assert_eq!(
        failed(&again).to_string(),
        "place: there is no item -5 (the recorded outcome of an earlier call with the same key: it was not run again; to try again, use another key)"
    );
    assert_eq!(work.runs.get(), 1, "the work did not run again");
    assert_eq!(s.effects().await, 0, "the work's insert was rolled back");
    let (status, output, kind, message) = s.record("call-b").await;
    assert_eq!(status, "error");
    assert_eq!(output, None);
    assert_eq!(kind.as_deref(), Some("unknown_item"));
    assert_eq!(message.as_deref(), Some("there is no item -5"));
}

/// A business error whose text holds a NUL (an agent's argument, echoed): recorded and
/// replayed on every database, the NUL as U+FFFD. Postgres refused to store it, so the
/// error went unrecorded and every repeat ran the work again.
pub async fn a_business_error_with_a_nul_is_recorded_and_replayed<D: OnceDriver>(s: &Setup<D>) {
    let work = Work::new(&s.t, Step::Refuse("no item named \0x"));
    let toolbox = toolbox(3, s.tool("refuse", &work));
    let first = call(&toolbox, "refuse", 1, "call-n").await;
    assert_eq!(failed(&first).kind(), FailureKind::Business);
    assert_eq!(
        failed(&first).to_string(),
        "refuse: no item named \u{FFFD}x"
    );
    let again = call(&toolbox, "refuse", 1, "call-n").await;
    assert_eq!(answer(&again), answer(&first), "the same business error");
    assert!(!failed(&first).replayed() && failed(&again).replayed());
    assert_eq!(work.runs.get(), 1, "the work did not run again");
    let (status, _, kind, message) = s.record("call-n").await;
    assert_eq!(status, "error");
    assert_eq!(kind.as_deref(), Some("refused"));
    assert_eq!(message.as_deref(), Some("no item named \u{FFFD}x"));
}

pub async fn a_permanent_database_error_is_recorded_with_its_code<D: OnceDriver>(s: &Setup<D>) {
    let keyed = unique_name("once_keyed");
    s.fx.exec(format!("CREATE TABLE {keyed} (id INT PRIMARY KEY)"))
        .await;
    let work = Work::new(&s.t, Step::Duplicate(keyed.clone()));
    let toolbox = toolbox(3, s.tool("register", &work));

    let first = call(&toolbox, "register", 1, "call-u").await;
    let failure = first.as_ref().unwrap_err().failure().unwrap();
    assert_eq!(failure.kind(), FailureKind::Business);
    assert!(!failure.replayed());
    let again = call(&toolbox, "register", 1, "call-u").await;
    assert_eq!(answer(&again), answer(&first));
    assert!(failed(&again).replayed());
    assert_eq!(work.runs.get(), 1);
    assert_eq!(s.effects().await, 0, "rolled back to the savepoint");
    assert_eq!(count(&s.fx, &keyed).await, 0);
    let (status, _, kind, message) = s.record("call-u").await;
    assert_eq!(status, "error");
    assert_eq!(kind.as_deref(), Some(D::DB.unique_kind()));
    // The server's own words, recorded and told: tokio-postgres says only "db error" and
    // keeps them in its error's cause.
    let message = message.unwrap();
    assert!(message.contains(D::DB.unique_phrase()), "{message}");
    assert_eq!(
        format!("register: {message}"),
        first.unwrap_err().to_string()
    );
    drop_tables(&s.fx, &[&keyed]).await;
}

pub async fn a_transient_failure_in_the_work_is_retried_and_never_recorded<D: OnceDriver>(
    s: &Setup<D>,
) {
    let work = Work::new(&s.t, Step::FlakyFirst);
    let toolbox = toolbox(3, s.tool("flaky", &work));
    let out = call(&toolbox, "flaky", 4, "call-t").await.unwrap();
    assert_eq!(
        out,
        placed(4, 1),
        "the second run's output: the first run was rolled back, claim and all"
    );
    assert_eq!(work.runs.get(), 2);
    assert_eq!(s.effects().await, 1);
    let (status, output, _, _) = s.record("call-t").await;
    assert_eq!(status, "ok");
    assert_eq!(
        serde_json::from_str::<Value>(&output.unwrap()).unwrap(),
        out
    );
    let again = call(&toolbox, "flaky", 4, "call-t").await.unwrap();
    assert_eq!(again, out);
    assert_eq!(work.runs.get(), 2);
}

pub async fn a_timed_out_attempt_is_run_again_because_the_record_decides<D: OnceDriver>(
    s: &Setup<D>,
) {
    let work = Work::new(&s.t, Step::HangFirst);
    // Not idempotent: `once` alone makes the timed-out attempt safe to rerun.
    let tool = s.tool("slow", &work).timeout(Duration::from_millis(300));
    let out = call(&toolbox(4, tool), "slow", 1, "call-s").await.unwrap();
    assert_eq!(out, placed(1, 1));
    assert_eq!(work.runs.get(), 2);
    assert_eq!(s.effects().await, 1, "the timed-out run was rolled back");
}

/// A `once` call that could not be confirmed: keyed by its arguments, it says that calling
/// again with them is safe; keyed by the call id, which a model's repeat does not reuse (an
/// MCP server makes a new one per call), it says to check first, as a tool without `once`.
pub async fn an_unconfirmed_call_says_whether_a_repeat_is_safe<D: OnceDriver>(s: &Setup<D>) {
    let work = Work::new(&s.t, Step::HangAlways);
    let by_args = txretry_tool::Once::key_from_args(|a: &Args| format!("item-{}", a.item))
        .table(&s.records)
        .unwrap();
    for (once, says) in [
        (
            by_args,
            "stuck: could not confirm the outcome after 2 attempts; calling again with the same \
             arguments is safe: it returns the outcome if the change was made, or makes it",
        ),
        (
            s.once(),
            "stuck: timed out after 2 attempts; it may or may not have taken effect, check \
             before trying again",
        ),
    ] {
        let tool = D::tool(&s.fx.handle(), "stuck", &work)
            .once(once)
            .timeout(Duration::from_millis(100));
        let result = call(&toolbox(2, tool), "stuck", 1, "call-x").await;
        let failure = failed(&result);
        assert_eq!(failure.kind(), FailureKind::TimedOut);
        assert_eq!(
            failure.attempts().len(),
            2,
            "a once call's timeout is retried"
        );
        assert_eq!(failure.to_string(), says);
    }
    assert_eq!(s.effects().await, 0, "nothing committed");
}
