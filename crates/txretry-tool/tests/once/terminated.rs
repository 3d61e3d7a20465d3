//! A backend terminated while it runs the COMMIT, on the Postgres pairs.
//!
//! The COMMIT is made to wait on the server for real by txretry-testkit's `HeldCommit`: a
//! deferred constraint trigger on the effects table runs at COMMIT and waits for an
//! advisory lock the helper's session holds. That session finds the session its lock
//! blocks in a COMMIT (`COMMIT`, or tokio-postgres' runner's `SELECT 1; COMMIT`), terminates
//! it, waits until its backend has gone and lets the lock go. The client gets 57P01 (or a
//! closed connection) for its COMMIT: ambiguous. It did not land (the trigger never got its
//! lock), so the call retried under the same key — by the runner on a new pooled
//! connection, or by the invocation on a new tokio-postgres client — finds no record and
//! runs the work again: one effect, one record.
//!
//! MariaDB has no deferred trigger to hold a COMMIT on the server; its lost COMMIT answer
//! is the commit-fault proxy's (`scenarios/crashes.rs`), and SQLite has no server.

use txretry_core::{Phase, Verdict};
use txretry_testkit::held_commit::HeldCommit;

use crate::common::*;
use crate::driver::OnceDriver;
use crate::scenarios::{Setup, recording};

macro_rules! terminated_scenarios {
    ($driver:ty) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_backend_terminated_during_commit_then_a_retry_with_the_same_key_gives_one_effect()
         {
            crate::scenarios::Setup::<$driver>::run(
                "once commit terminated",
                crate::terminated::terminated_during_commit::<$driver>,
            )
            .await;
        }
    };
}

pub(crate) use terminated_scenarios;

pub async fn terminated_during_commit<D: OnceDriver>(s: &Setup<D>) {
    let url = s.fx.server_url().expect("a Postgres server").to_owned();
    s.migrate().await;
    let mut held = HeldCommit::install(&url, &s.t).await;
    let killer = held.terminate_in_commit();

    let work = Work::new(&s.t, Step::Place);
    let (toolbox, retried) = recording(s.tool("place", &work));
    let out = call(&toolbox, "place", 11, "call-k").await.unwrap();
    // The killer panics unless it terminated a session blocked in its COMMIT.
    killer.await.unwrap();

    assert_eq!(
        *retried.lock().unwrap(),
        [(Verdict::Ambiguous, Phase::Commit, 1)],
        "the ambiguous COMMIT was retried, under the same key"
    );
    assert_eq!(
        work.runs.get(),
        2,
        "the first COMMIT did not land, so the retry found no record and ran the work"
    );
    assert_eq!(out, placed(11, 1));
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.record("call-k").await.0, "ok");

    let again = call(&toolbox, "place", 11, "call-k").await.unwrap();
    assert_eq!(again, out);
    assert_eq!(work.runs.get(), 2);
    assert_eq!(s.effects().await, 1);
    // The trigger goes first; `Setup::run` drops the tables after.
    held.remove().await;
}
