//! A call replayed, and its duplicates: sixteen at once, and sixteen queued behind a claim
//! that rolls back.

use std::time::Duration;

use serde_json::Value;
use txretry_tool::Toolbox;

use super::{Answer, Setup, toolbox};
use crate::common::*;
use crate::driver::OnceDriver;

/// Sixteen concurrent calls of `tool` with `item` and the same call id, once the first
/// one's work has started and (where the database can say) the other fifteen queue on its
/// claim of the key.
async fn sixteen_queued<D: OnceDriver>(
    s: &Setup<D>,
    toolbox: &Toolbox,
    tool: &'static str,
    item: i64,
    runs: &Counter,
) -> Vec<tokio::task::JoinHandle<Answer>> {
    let calls = (0..16)
        .map(|_| {
            let toolbox = toolbox.clone();
            tokio::spawn(async move { call(&toolbox, tool, item, "call-dup").await })
        })
        .collect();
    // The first claim holds the key inside its transaction; the others must queue on the
    // database's lock on it.
    poll_until("the first call's work never started", async || {
        runs.get() >= 1
    })
    .await;
    match D::DB.waiting_sql(&s.records) {
        Some(sql) => {
            poll_until("the duplicates never queued on the key", async || {
                s.fx.scalar(sql.clone()).await >= 15
            })
            .await
        }
        // SQLite: the duplicates wait in the busy handler, which nothing reports.
        None => tokio::time::sleep(Duration::from_millis(200)).await,
    }
    calls
}

async fn answers(calls: Vec<tokio::task::JoinHandle<Answer>>) -> Vec<Answer> {
    let mut answers = Vec::new();
    for call in calls {
        answers.push(within(call).await.unwrap());
    }
    answers
}

pub async fn replaying_a_committed_call_returns_the_same_output_and_the_effect_is_once<
    D: OnceDriver,
>(
    s: &Setup<D>,
) {
    let work = Work::new(&s.t, Step::Place);
    let toolbox = toolbox(3, s.tool("place", &work));
    assert!(toolbox.offered(&anyone())[0].is_once());

    let first = call(&toolbox, "place", 7, "call-1").await.unwrap();
    assert_eq!(first, placed(7, 1));
    let again = call(&toolbox, "place", 7, "call-1").await.unwrap();
    assert_eq!(
        again, first,
        "the recorded output, as the first call returned it"
    );
    assert_eq!(work.runs.get(), 1, "the work did not run again");
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.recorded().await, 1);
    let (status, output, kind, message) = s.record("call-1").await;
    assert_eq!(status, "ok");
    let output: Value = serde_json::from_str(&output.unwrap()).unwrap();
    assert_eq!(output, first);
    assert_eq!((kind, message), (None, None));

    // Another key is another call.
    let other = call(&toolbox, "place", 7, "call-2").await.unwrap();
    assert_eq!(other["effects"], 2);
    assert_eq!(work.runs.get(), 2);
    assert_eq!(s.effects().await, 2);
}

pub async fn sixteen_concurrent_duplicates_give_one_effect_and_sixteen_identical_answers<
    D: OnceDriver,
>(
    s: &Setup<D>,
) {
    // The table exists before the race: the race is about the key, not the DDL.
    s.migrate().await;
    let gate = Gate::closed();
    let work = Work::new(&s.t, Step::Place).gated(&gate);
    let toolbox = toolbox(5, s.tool("place", &work));

    let calls = sixteen_queued(s, &toolbox, "place", 3, &work.runs).await;
    assert_eq!(
        work.runs.get(),
        1,
        "the duplicates wait; they do not run the work"
    );
    gate.release();
    let answers = answers(calls).await;
    let first = answers[0].as_ref().unwrap().clone();
    assert_eq!(first, placed(3, 1));
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(answer.as_ref().unwrap(), &first, "answer {i}");
    }
    assert_eq!(work.runs.get(), 1, "the work ran once");
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.recorded().await, 1);
}

pub async fn duplicates_queued_behind_a_claim_that_rolls_back_get_one_effect<D: OnceDriver>(
    s: &Setup<D>,
) {
    s.migrate().await;
    let gate = Gate::closed();
    // The duplicates queue behind the first claim; then it rolls back. On MariaDB, the
    // row's rollback leaves the duplicates' locks on the gap, and InnoDB ends all but one
    // of their claims as deadlocks (1213): retried, they queue behind the new claim.
    let work = Work::new(&s.t, Step::FlakyFirst).gated(&gate);
    let retries = Counter::default();
    let toolbox = Toolbox::builder()
        .policy(fast_counting(10, &retries))
        .tool(s.tool("flaky", &work))
        .build()
        .unwrap();
    let calls = sixteen_queued(s, &toolbox, "flaky", 5, &work.runs).await;
    gate.release();
    let answers = answers(calls).await;
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(answer.as_ref().unwrap(), &placed(5, 1), "answer {i}");
    }
    assert_eq!(work.runs.get(), 2, "the rolled-back run, then one more");
    if D::DB.handoff_deadlocks() {
        // The first call's retry, and at least one duplicate's after a deadlock.
        assert!(retries.get() > 1, "retries: {}", retries.get());
    } else {
        assert_eq!(retries.get(), 1, "only the first call's retry");
    }
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.recorded().await, 1);
}
