//! A key's holder and its waiter, two processes of one session each: the holder's session
//! killed, the waiter's attempt dropped while the server has it waiting, its wait cancelled
//! on the server, a wait not granted in time; and one session through every way a
//! transaction ends, holding no lock after any. Every wait is observed on the server
//! ([`Server::waiting_for`]), never timed.

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

    /// A holds the key while B's `worker` runs a transaction on `options` (the key among
    /// others): it fails with a lock timeout naming the key (on MySQL, where the keys are
    /// asked for in one statement), its body never ran, and it let go of every key in
    /// `others`; then A lets go.
    async fn b_refused_while_a_holds(
        &self,
        url: &str,
        worker: &mut <Db as Driver>::Worker,
        policy: &RetryPolicy,
        options: &TxOptions,
        others: &[&(String, i64)],
    ) {
        let release = Arc::new(Notify::new());
        let (holder, holder_id) = self.a_holds(url, &release).await;
        let (ran_on, failed) = fails(worker, policy, options, Then::Commit).await;
        assert_eq!(
            failed.outcome.verdict(),
            Verdict::Transient(TransientKind::LockTimeout),
            "{failed:?}"
        );
        SERVER.lock_timeout(&self.key).assert(&failed);
        assert!(ran_on.is_empty(), "the body never ran");
        self.assert_held_by(url, holder_id, "only A's").await;
        for key in others {
            assert_eq!(Db::key_holders(url, key).await, 0, "{key:?} let go");
        }
        release.notify_one();
        within(holder).await.unwrap().unwrap();
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
    query: impl Into<String>,
) -> (i64, i64) {
    let (started, mut ran) = mpsc::unbounded_channel();
    let then = Then::Select(query.into(), started.clone());
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

/// A session whose statements time out sooner than admission's wait (Postgres's
/// `statement_timeout`, MariaDB's `max_statement_time`): the wait for a key another session
/// holds outlasts it and is granted once the holder lets go. The wait was cut short, a
/// permanent failure (57014; MariaDB's GET_LOCK answering NULL, read as 1317), after the
/// session's 100 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_statement_timeout_does_not_cut_the_wait_short() {
    let Some(url) = url("statement timeout") else {
        return;
    };
    let url = &url;
    let two = Two::new(url, "stmt_timeout", Some(SERVER.short_statement_timeout())).await;
    let patient = policy(Admission::per_key().in_database(Duration::from_secs(30)), 1);
    let release = Arc::new(Notify::new());
    let (holder, holder_id) = two.a_holds(url, &release).await;

    let mut worker_b = Db::worker(&two.b).await;
    let options = two.options.clone();
    let (started, mut b_ran) = mpsc::unbounded_channel();
    let waiter = tokio::spawn(async move {
        Db::run(&mut worker_b, &patient, &options, started, Then::Commit).await
    });
    let waiter_id = waiter_of(url, &two.key).await;
    // Several times B's statement timeout, waiting on the server all along.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(
        !waiter.is_finished(),
        "B stopped waiting: {:?}",
        waiter.await
    );
    assert!(b_ran.try_recv().is_err(), "B's body waits for the key");
    assert_eq!(
        Db::query_i64(url, SERVER.waiting_for(&two.key)).await,
        waiter_id
    );
    assert_eq!(
        Db::query_i64(url, SERVER.holder_of(&two.key)).await,
        holder_id,
        "still A's"
    );

    release.notify_one();
    within(holder).await.unwrap().unwrap();
    within(waiter)
        .await
        .unwrap()
        .expect("B gets the key once A lets go");
    assert!(b_ran.try_recv().is_ok(), "B's body ran");
    assert_eq!(Db::key_holders(url, &two.key).await, 0);
    two.close().await;
}

/// Runs one transaction on `worker` that must fail; returns the session ids its attempts
/// ran on, and how it failed.
async fn fails(
    worker: &mut <Db as Driver>::Worker,
    policy: &RetryPolicy,
    options: &TxOptions,
    then: Then,
) -> (Vec<i64>, Failed) {
    let (started, mut ran) = mpsc::unbounded_channel();
    let failed = within(Db::run(worker, policy, options, started, then))
        .await
        .expect_err("the transaction fails");
    let mut ids = Vec::new();
    while let Ok(id) = ran.try_recv() {
        ids.push(id);
    }
    (ids, failed)
}

/// After a commit, a business error, a database error and a lock not granted in time, a
/// worker's one session goes back holding none of the keys' locks and serves the next
/// transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_goes_back_holding_no_lock_after_every_ending() {
    let Some(url) = url("every ending") else {
        return;
    };
    let url = &url;
    let two = Two::new(url, "ending", None).await;
    let name = &two.key.0;
    let keys = [two.key.clone(), key(name, 2), key(name, 3)];
    let all = keys.iter().fold(TxOptions::new(), |options, key| {
        options.contends_on(key.clone())
    });
    let policy = policy(Admission::per_key().in_database(Duration::from_secs(1)), 1);
    let mut worker = Db::worker(&two.b).await;
    let no_lock_held = async |after: &str| {
        for key in &keys {
            let holders = Db::key_holders(url, key).await;
            assert_eq!(holders, 0, "{key:?} after {after}");
        }
    };

    // A commit, holding the three keys inside.
    let (session, held) = select(&mut worker, &policy, &all, SERVER.held_here(&keys)).await;
    assert_eq!(held, 3, "held while the transaction ran");
    no_lock_held("a commit").await;

    // A business error.
    let (ran_on, failed) = fails(&mut worker, &policy, &all, Then::Refuse).await;
    assert_eq!(failed.outcome.verdict(), Verdict::Permanent, "{failed:?}");
    assert_eq!(ran_on, [session]);
    no_lock_held("a business error").await;

    // A database error: a missing table (42P01 on Postgres, 42S02 on MySQL).
    let (selected, _) = mpsc::unbounded_channel();
    let missing = Then::Select(SERVER.missing_table(name), selected);
    let (ran_on, failed) = fails(&mut worker, &policy, &all, missing).await;
    assert_eq!(failed.outcome.verdict(), Verdict::Permanent, "{failed:?}");
    let undefined_table = match SERVER {
        Server::Postgres => "42P01",
        Server::MySql => "42S02",
    };
    assert_eq!(failed.said.sqlstate.as_deref(), Some(undefined_table));
    assert_eq!(ran_on, [session]);
    no_lock_held("a database error").await;

    // A lock not granted in time: process A holds the first key.
    let others: Vec<&(String, i64)> = keys[1..].iter().collect();
    two.b_refused_while_a_holds(url, &mut worker, &policy, &all, &others)
        .await;
    no_lock_held("a lock not granted").await;

    let (again, _) = select(&mut worker, &policy, &all, SERVER.session_id()).await;
    assert_eq!(again, session, "the one session served every transaction");
    no_lock_held("the last commit").await;
    two.close().await;
}

/// A wait for a key cancelled on the server (`pg_cancel_backend`, `KILL QUERY`) fails the
/// attempt for good: permanent, not retried, and the session goes back clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_is_permanent() {
    let Some(url) = url("cancelled wait") else {
        return;
    };
    let url = &url;
    let two = Two::new(url, "cancelwait", None).await;
    let release = Arc::new(Notify::new());
    let (holder, holder_id) = two.a_holds(url, &release).await;

    let (started, mut b_ran) = mpsc::unbounded_channel();
    let mut worker_b = Db::worker(&two.b).await;
    let waiter = tokio::spawn({
        let options = two.options.clone();
        async move {
            let policy = policy(shared(), 3);
            let result = Db::run(&mut worker_b, &policy, &options, started, Then::Commit).await;
            (worker_b, result)
        }
    });
    let waiter_id = waiter_of(url, &two.key).await;
    Db::exec(url, SERVER.cancel(waiter_id)).await;
    let (mut worker_b, result) = within(waiter).await.unwrap();
    let failed = result.expect_err("the wait was cancelled");
    assert_eq!(failed.outcome.verdict(), Verdict::Permanent, "{failed:?}");
    SERVER.wait_cancelled(&two.key).assert(&failed);
    assert_eq!(failed.outcome.attempts(), 1, "not retried");
    assert!(b_ran.try_recv().is_err(), "B's body never ran");
    two.assert_held_by(url, holder_id, "only A's").await;

    // B's session went back clean: the next transaction runs on it.
    let unkeyed = TxOptions::new();
    let (b_id, _) = select(
        &mut worker_b,
        &policy(shared(), 1),
        &unkeyed,
        SERVER.session_id(),
    )
    .await;
    assert_eq!(b_id, waiter_id, "on the session that waited");

    release.notify_one();
    within(holder).await.unwrap().unwrap();
    assert_eq!(Db::key_holders(url, &two.key).await, 0);
    two.close().await;
}

/// A transaction naming thousands of keys: its locks are taken in chains of 64 keys, one
/// chain after the other in one statement (nested in one chain, the statement failed for
/// good: past about 700 keys MariaDB overran its thread stack, past about 2,000 Postgres'
/// parser ran out of memory). It commits holding them all and lets them all go; a key held
/// elsewhere is waited for and reported like any other, and the keys taken before it are
/// let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_keys_in_one_transaction() {
    let Some(url) = url("many keys") else {
        return;
    };
    let url = &url;
    let two = Two::new(url, "many", None).await;
    let name = &two.key.0;
    let keys: Vec<(String, i64)> = (1..=2_500).map(|n| key(name, n)).collect();
    let all = keys.iter().fold(TxOptions::new(), |options, key| {
        options.contends_on(key.clone())
    });
    let policy = policy(Admission::per_key().in_database(Duration::from_secs(1)), 1);
    let mut worker = Db::worker(&two.b).await;
    let some_keys = [&keys[0], &keys[1_249], &keys[2_499]];

    let sample = &keys[..100];
    let (_, held) = select(&mut worker, &policy, &all, SERVER.held_here(sample)).await;
    assert_eq!(held, 100, "held while the transaction ran");
    for key in some_keys {
        assert_eq!(
            Db::key_holders(url, key).await,
            0,
            "{key:?} after the commit"
        );
    }

    let others: Vec<&(String, i64)> = some_keys
        .into_iter()
        .filter(|key| **key != two.key)
        .collect();
    two.b_refused_while_a_holds(url, &mut worker, &policy, &all, &others)
        .await;
    two.close().await;
}
