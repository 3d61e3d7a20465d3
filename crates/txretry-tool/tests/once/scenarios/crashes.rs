//! A process dying before or after COMMIT (every pair), and a COMMIT whose answer is lost
//! on the way (the server pairs, through the commit-fault proxy).

use txretry_core::{Phase, Verdict};
use txretry_tool::{FailureKind, Toolbox};

use super::{Setup, failed, recording, toolbox};
use crate::common::*;
use crate::driver::OnceDriver;

/// The `place` tool doing `step`'s work on a records' table made beforehand, after its
/// call of `item` under `key` died (the handler panicked) and failed saying so.
async fn died<D: OnceDriver>(s: &Setup<D>, step: Step, item: i64, key: &str) -> (Work, Toolbox) {
    s.migrate().await;
    let work = Work::new(&s.t, step);
    let toolbox = toolbox(3, s.tool("place", &work));
    let result = call(&toolbox, "place", item, key).await;
    assert_eq!(failed(&result).kind(), FailureKind::Panicked);
    (work, toolbox)
}

/// The work dies (panics) inside its transaction, as a process dying before COMMIT: the
/// transaction is rolled back, nothing is recorded, and the call re-sent with the same key
/// runs the work: one effect.
pub async fn a_process_dying_before_commit_leaves_nothing_and_the_resent_call_runs<
    D: OnceDriver,
>(
    s: &Setup<D>,
) {
    let (work, toolbox) = died(s, Step::DieBeforeCommitFirst, 6, "call-d").await;
    assert_eq!(
        s.recorded().await,
        0,
        "no record: the claim was rolled back"
    );
    let resent = call(&toolbox, "place", 6, "call-d").await.unwrap();
    assert_eq!(resent, placed(6, 1));
    assert_eq!(work.runs.get(), 2);
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.record("call-d").await.0, "ok");
}

/// The handler dies (panics) after its `once` call committed, before it answers: the
/// caller never got the answer, as after a process dying then, or an answer lost on the
/// way. The call re-sent with the same key gets the recorded answer; the work does not run
/// again.
pub async fn a_process_dying_after_commit_leaves_the_record_the_resent_call_gets<D: OnceDriver>(
    s: &Setup<D>,
) {
    let (work, toolbox) = died(s, Step::DieAfterCommitFirst, 2, "call-a").await;
    assert_eq!(s.record("call-a").await.0, "ok", "the commit landed");
    let resent = call(&toolbox, "place", 2, "call-a").await.unwrap();
    assert_eq!(resent, placed(2, 1));
    assert_eq!(work.runs.get(), 1, "the work did not run again");
    assert_eq!(s.effects().await, 1, "one effect");
}

/// The commit-fault proxy lets a COMMIT land and answers it with a connection-class error
/// (Postgres: FATAL 08P01; MariaDB: the connection closed, 2013). The COMMIT is ambiguous;
/// the call is retried under the same key — by the runner on a new pooled connection, or,
/// on a tokio-postgres client the runner cannot replace, by the invocation running the
/// handler again — and the claim finds the record: one effect, one answer. The call
/// re-sent later gets the same answer.
pub async fn a_lost_commit_answer_is_resolved_by_the_resent_call<D: OnceDriver>(s: &Setup<D>) {
    let url = s.fx.server_url().expect("a server database").to_owned();
    s.migrate().await;
    let proxy = txretry_testkit::CommitFaultProxy::start(&url).unwrap();
    let via = D::through(proxy.url()).await;
    let work = Work::new(&s.t, Step::Place);
    let (toolbox, retried) = recording(D::tool(&via, "place", &work).once(s.once()));

    proxy.arm_commit_faults(1);
    let first = call(&toolbox, "place", 5, "call-p").await.unwrap();
    assert_eq!(
        proxy.faults_injected(),
        1,
        "the COMMIT landed, its answer was lost"
    );
    assert_eq!(first, placed(5, 1));
    assert_eq!(
        work.runs.get(),
        1,
        "the retry found the record: the work did not run again"
    );
    assert_eq!(
        *retried.lock().unwrap(),
        [(Verdict::Ambiguous, Phase::Commit, 1)],
        "one retry, of the ambiguous COMMIT"
    );
    assert_eq!(s.effects().await, 1, "one effect");

    let resent = call(&toolbox, "place", 5, "call-p").await.unwrap();
    assert_eq!(resent, first);
    assert_eq!(work.runs.get(), 1);
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.recorded().await, 1);
}
