//! The backend is terminated while it runs the runner's COMMIT. The COMMIT is made to wait
//! on the server for real (txretry-testkit's `HeldCommit`: a deferred constraint trigger
//! waits at COMMIT for an advisory lock another session holds); that session sees this
//! backend blocked with `COMMIT` in its query text and `pg_terminate_backend`s it. The
//! client gets 57P01 (or a closed connection) in answer to its COMMIT: it cannot know
//! whether the transaction committed, so the verdict is ambiguous and the closure is not
//! run again.

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_terminated_during_commit_is_ambiguous() {
    let Some(url) = url("tokio_postgres::commit_terminated") else {
        return;
    };
    let mut client = connect(&url).await;
    let pid = backend_pid(&client).await;
    let terminated = commit_terminated(&url, &table("tp_commit_killed"), &mut client).await;
    assert_eq!(
        terminated.pid, pid,
        "the runner's backend was terminated in its COMMIT"
    );
}
