//! A key's holder and its waiter, two processes of one session each: the holder's session
//! killed, the waiter's attempt dropped while the server has it waiting, and a wait not
//! granted in time. Every wait is observed on the server ([`Server::waiting_for`]), never
//! timed.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;
use txretry::{Admission, Phase, RetryPolicy, StopReason, TransientKind, TxOptions, Verdict};
use txretry_testkit::intervals::{policy, shared};
use txretry_testkit::wait::{poll_until, within};

use super::{Driver, Failed, Server, SessionState, Started, Then, key, url};
use crate::admission_db::Db;

const SERVER: Server = Db::BINARY.server;

type Process = <Db as Driver>::Process;

/// A test's two processes of one session each (`{name}_a`, `{name}_b`; B's sessions run
/// `b_setup` first), and a key of their own.
struct Two {
    a: Process,
    b: Process,
    key: (String, i64),
    options: TxOptions,
}

impl Two {
    async fn new(url: &str, test: &str, b_setup: Option<&'static str>) -> Self {
        let name = txretry_testkit::unique_name(&format!("{}_{test}", Db::BINARY.prefix));
        let a = Db::process(url, &format!("{name}_a"), 1, None).await;
        let b = Db::process(url, &format!("{name}_b"), 1, b_setup).await;
        let key = key(&name, 1);
        let options = TxOptions::new().contends_on(key.clone());
        Two { a, b, key, options }
    }

    /// A's transaction on the key, in a task of its own, holding it until `release`;
    /// returns it once it holds the key, with its session's id.
    async fn a_holds(
        &self,
        url: &str,
        release: &Arc<Notify>,
    ) -> (JoinHandle<Result<(), Failed>>, i64) {
        let (started, mut a_ran) = mpsc::unbounded_channel();
        let then = Then::WaitFor(release.clone());
        let holder = spawn(&self.a, policy(shared(), 1), &self.options, started, then).await;
        let holder_id = within(a_ran.recv()).await.unwrap();
        self.assert_held_by(url, holder_id, "A holds the key").await;
        (holder, holder_id)
    }

    /// Asserts the key is held by session `id` alone, nobody waiting.
    async fn assert_held_by(&self, url: &str, id: i64, what: &str) {
        let key = &self.key;
        assert_eq!(
            Db::query_i64(url, SERVER.holder_of(key)).await,
            id,
            "{what}"
        );
        assert_eq!(Db::key_holders(url, key).await, 1, "{what}: one session");
    }

    async fn close(self) {
        Db::close(self.a).await;
        Db::close(self.b).await;
    }
}

/// Runs [`Driver::run`] on a worker of `process` in a task of its own.
async fn spawn(
    process: &Process,
    policy: RetryPolicy,
    options: &TxOptions,
    started: Started,
    then: Then,
) -> JoinHandle<Result<(), Failed>> {
    let mut worker = Db::worker(process).await;
    let options = options.clone();
    tokio::spawn(async move { Db::run(&mut worker, &policy, &options, started, then).await })
}

/// Runs one transaction on `worker` under `policy` and `options` that selects `query`;
/// returns its session's id and what it selected. Panics if it fails.
async fn select(
    worker: &mut <Db as Driver>::Worker,
    policy: &RetryPolicy,
    options: &TxOptions,
    query: &'static str,
) -> (i64, i64) {
    let (started, mut ran) = mpsc::unbounded_channel();
    let then = Then::Select(query, started.clone());
    within(Db::run(worker, policy, options, started, then))
        .await
        .unwrap();
    let id = ran.try_recv().unwrap();
    let selected = ran.try_recv().unwrap();
    assert!(ran.try_recv().is_err(), "one attempt");
    (id, selected)
}

/// Waits until a session waits on the server for `key`, and returns its id.
async fn waiter_of(url: &str, key: &(String, i64)) -> i64 {
    let mut waiter = 0;
    poll_until(format!("nobody ever waited for {key:?}"), async || {
        waiter = Db::query_i64(url, SERVER.waiting_for(key)).await;
        waiter != 0
    })
    .await;
    waiter
}

/// Waits until the server shows session `id` in `state`.
async fn until_session(url: &str, id: i64, state: SessionState) {
    poll_until(format!("session {id} never {state:?}"), async || {
        Db::query_i64(url, SERVER.session_state(id)).await == state as i64
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_session_releases_its_key() {
    let Some(url) = url("killed") else { return };
    let url = &url;
    let two = Two::new(url, "killed", None).await;
    let (key, options) = (&two.key, &two.options);

    // Process A holds the key and sleeps in the server until its session is killed.
    let (started, mut a_ran) = mpsc::unbounded_channel();
    let holder = spawn(
        &two.a,
        policy(shared(), 1),
        options,
        started,
        Then::SleepInServer,
    )
    .await;
    let holder_id = within(a_ran.recv()).await.unwrap();
    two.assert_held_by(url, holder_id, "A holds the key").await;

    // Process B waits for it on the server.
    let (started, mut b_ran) = mpsc::unbounded_channel();
    let waiter = spawn(&two.b, policy(shared(), 1), options, started, Then::Commit).await;
    let waiter_id = waiter_of(url, key).await;
    assert_ne!(waiter_id, holder_id);
    assert!(b_ran.try_recv().is_err(), "B waits while A holds the key");

    Db::exec(url, SERVER.kill(holder_id)).await;
    until_session(url, holder_id, SessionState::Gone).await;
    within(waiter)
        .await
        .unwrap()
        .expect("B gets the key once A's session is gone");
    assert_eq!(
        b_ran.try_recv(),
        Ok(waiter_id),
        "B ran on the session that waited"
    );
    assert!(b_ran.try_recv().is_err(), "B ran once");
    let failed = within(holder)
        .await
        .unwrap()
        .expect_err("A's session was killed");
    assert_ne!(failed.outcome.verdict(), Verdict::Permanent, "{failed:?}");
    assert_eq!(failed.outcome.stop_reason(), Db::KILLED, "{failed:?}");
    assert!(a_ran.try_recv().is_err(), "A ran once");
    assert_eq!(Db::key_holders(url, key).await, 0, "B let go after COMMIT");
    two.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_waiter_releases_everything() {
    let Some(url) = url("cancelled") else { return };
    let url = &url;
    let two = Two::new(url, "cancel", None).await;
    let (key, options) = (&two.key, &two.options);
    let release = Arc::new(Notify::new());
    let (holder, _) = two.a_holds(url, &release).await;

    // B's attempt is dropped while the server has it waiting for the key; B keeps its
    // worker, as a caller whose call timed out would.
    let (started, mut b_ran) = mpsc::unbounded_channel();
    let (cancel, cancelled) = oneshot::channel::<()>();
    let policy_b = policy(shared(), 1);
    let mut worker_b = Db::worker(&two.b).await;
    let waiter = tokio::spawn({
        let (policy_b, options) = (policy_b.clone(), options.clone());
        async move {
            tokio::select! {
                _ = Db::run(&mut worker_b, &policy_b, &options, started, Then::Commit) => {
                    panic!("B cannot finish while A holds the key")
                }
                _ = cancelled => {}
            }
            worker_b
        }
    });
    let waiter_id = waiter_of(url, key).await;
    cancel.send(()).unwrap();
    let mut worker_b = within(waiter).await.unwrap();

    release.notify_one();
    within(holder).await.unwrap().unwrap();
    // Once the server has let go of B's wait (granted, then released with the dropped
    // attempt's ROLLBACK or with the session's end), B's session is closed or idle and
    // holds nothing.
    until_session(url, waiter_id, Db::AFTER_CANCEL).await;
    assert!(b_ran.try_recv().is_err(), "the cancelled attempt never ran");
    assert_eq!(Db::key_holders(url, key).await, 0, "nobody holds the key");
    let free = Db::query_i64(url, SERVER.key_free(key)).await;
    assert_eq!(free, 1, "the key can be taken at once");
    // And B runs a transaction on it again.
    let (b_id, _) = select(&mut worker_b, &policy_b, options, SERVER.session_id()).await;
    match Db::AFTER_CANCEL {
        SessionState::Idle => assert_eq!(b_id, waiter_id, "on the session that waited"),
        _ => assert_ne!(b_id, waiter_id, "on a new session"),
    }
    assert_eq!(Db::key_holders(url, key).await, 0);
    two.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_not_granted_in_time_is_a_lock_timeout() {
    let Some(url) = url("lock timeout") else {
        return;
    };
    let url = &url;
    // B's sessions set a setting of their own, which its transactions must keep.
    let (set, kept) = SERVER.own_setting();
    let two = Two::new(url, "timeout", Some(set)).await;
    let (key, options) = (&two.key, &two.options);
    let impatient = policy(
        Admission::per_key().in_database(Duration::from_millis(300)),
        2,
    );
    let mut worker_b = Db::worker(&two.b).await;
    // B's one session, before any contention.
    let (b_id, setting) = select(&mut worker_b, &impatient, options, kept).await;
    assert_eq!(setting, 1, "B's session setting");

    let release = Arc::new(Notify::new());
    let (holder, holder_id) = two.a_holds(url, &release).await;

    let (started, mut b_ran) = mpsc::unbounded_channel();
    let failed = within(Db::run(
        &mut worker_b,
        &impatient,
        options,
        started,
        Then::Commit,
    ))
    .await
    .expect_err("A holds the key throughout");
    assert!(b_ran.try_recv().is_err(), "B's body never ran");
    let outcome = &failed.outcome;
    assert_eq!(
        outcome.verdict(),
        Verdict::Transient(TransientKind::LockTimeout),
        "{failed:?}"
    );
    SERVER.lock_timeout(key).assert(&failed);
    assert_eq!(outcome.phase(), Phase::Body);
    assert_eq!(outcome.attempts(), 2, "retried under the policy");
    assert_eq!(outcome.stop_reason(), StopReason::AttemptsExhausted);

    // B's session went back to the process clean: idle, out of the failed transaction,
    // holding nothing, its setting kept.
    until_session(url, b_id, SessionState::Idle).await;
    two.assert_held_by(url, holder_id, "only A's").await;
    let no_key = TxOptions::new();
    assert_eq!(
        select(&mut worker_b, &impatient, &no_key, kept).await,
        (b_id, 1)
    );

    release.notify_one();
    within(holder).await.unwrap().unwrap();
    assert_eq!(Db::key_holders(url, key).await, 0);
    // Uncontended now, B's session commits at once, with its own setting.
    assert_eq!(
        select(&mut worker_b, &impatient, options, kept).await,
        (b_id, 1)
    );
    assert_eq!(Db::key_holders(url, key).await, 0);
    two.close().await;
}
