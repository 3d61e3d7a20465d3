//! The commit boundary through txretry-testkit's `CommitFaultProxy`, written once for sqlx
//! and SeaORM, each on PostgreSQL and on MySQL: the runner's COMMIT reaches the server and
//! lands, but the proxy answers it with a connection-class error — what PgBouncer sends
//! when its server link breaks (FATAL 08P01), what a MySQL client reports when the link
//! drops mid-query (2013) — and closes the connection. Nobody can tell from that answer
//! whether the transaction committed: the verdict is ambiguous, and the runner runs the
//! closure again only for a call declared idempotent, on a new connection from the pool.
//!
//! The client is a pool of one connection through the proxy, never tested on acquire, so
//! only the runner's own decision (and sqlx's ping of a connection handed back) keeps the
//! broken connection out of the next call. Where the driver lets the test count the
//! connections handed back to the pool (sqlx's `after_release`), the scenarios also check
//! that the runner discarded the broken one rather than handing it back.
//!
//! A `#[path]` module `lost_commit` of the `sqlx-postgres`, `sqlx-mysql`,
//! `sea-orm-postgres` and `sea-orm-mysql` binaries; `tests/sqlx-shared/commit_fault.rs`
//! and `tests/sea-orm-shared/commit_fault.rs` implement [`LostCommit`] and run the
//! scenarios with [`lost_commit_tests!`].

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use txretry::{
    Backoff, Code, KindSet, Phase, RetryPolicy, StopReason, TransientKind, TxError, TxOptions,
    Verdict,
};
use txretry_testkit::CommitFaultProxy;
use txretry_testkit::outcome::assert_outcome;
use txretry_testkit::record::Seen;
use txretry_testkit::wait::within;

/// What differs between the drivers and servers, for the scenarios.
pub trait LostCommit {
    /// The test binary, for naming tests in skip messages.
    const DRIVER: &'static str;
    /// A short text column type.
    const TEXT: &'static str;
    /// What follows a `CREATE TABLE`'s column list.
    const TABLE_OPTIONS: &'static str;
    /// Connections straight to the server.
    type Direct;
    /// A pool of one connection through the proxy, and whatever counts its releases.
    type Client;
    /// The driver's error.
    type Error: std::error::Error + Send + Sync + 'static;
    /// A session's id, as the server numbers its connections.
    type SessionId: Debug + PartialEq;

    /// The server's URL and connections to it, or `None` when the test must skip.
    fn setup(test: &str) -> impl Future<Output = Option<(String, Self::Direct)>>;
    /// Runs `sql` (no parameters) on the server directly.
    fn exec(direct: &Self::Direct, sql: String) -> impl Future<Output = ()>;
    /// The one integer `sql` returns, read on the server directly.
    fn count(direct: &Self::Direct, sql: String) -> impl Future<Output = i64>;
    /// A pool of one connection through `proxy`, never tested on acquire.
    fn via(proxy: &CommitFaultProxy) -> impl Future<Output = Self::Client>;
    /// How many connections have been handed back to the pool so far, or `None` where the
    /// driver does not tell. Holds the pool's one connection while it reads (returning a
    /// connection runs in the background, and the acquire waits for it); handing this one
    /// back counts too, in the next reading.
    fn released_so_far(client: &Self::Client) -> impl Future<Output = Option<usize>>;
    /// The runner (`transaction_with`) on `client`: each attempt pushes its session's id
    /// onto `sessions`, then runs `sql` and returns the rows it affected.
    fn transaction(
        client: &Self::Client,
        policy: &RetryPolicy,
        options: &TxOptions,
        sessions: &mut Vec<Self::SessionId>,
        sql: &str,
    ) -> impl Future<Output = Result<u64, TxError<Self::Error>>>;
    /// `INSERT INTO {t} VALUES ({values})`, doing nothing when the key exists.
    fn insert_once(t: &str, values: &str) -> String;
    /// The code the proxy answers a COMMIT with (08P01; MySQL's 2013).
    fn lost_commit_code() -> Option<Code>;
    /// Asserts that `err` is the proxy's answer to a COMMIT, unchanged.
    fn assert_lost_commit_error(err: &Self::Error);
}

/// Five attempts, every kind retried (connection failures included), recording retries
/// and give-ups.
fn retry_everything(seen: &Seen) -> RetryPolicy {
    let policy = RetryPolicy::builder()
        .max_attempts(5)
        .backoff(Backoff::Constant(Duration::from_millis(1)))
        .retry_on(KindSet::ALL);
    seen.give_ups(seen.retries(policy)).build().unwrap()
}

/// What the proxy's fault looks like to the runner's caller: the proxy's error, unchanged,
/// judged ambiguous at COMMIT on the first attempt, and not retried (not idempotent).
#[track_caller]
fn assert_ambiguous_commit<D: LostCommit>(err: &TxError<D::Error>) {
    D::assert_lost_commit_error(err.error());
    // On its own, the proxy's error is a connection failure…
    assert_eq!(
        txretry::classify(err.error()).verdict,
        Verdict::Transient(TransientKind::Connection)
    );
    // …but at COMMIT it means "may have committed".
    let outcome = err.outcome();
    assert!(outcome.may_have_committed(), "{outcome:?}");
    assert_outcome(
        err,
        Verdict::Ambiguous,
        Phase::Commit,
        1,
        StopReason::NotRetryable,
    );
    assert_eq!(outcome.code(), D::lost_commit_code());
    assert_eq!(outcome.history().len(), 1, "{outcome:?}");
}

/// Asserts the count of connections handed back, where the driver tells it.
#[track_caller]
fn assert_released(now: Option<usize>, before: Option<usize>, more: usize, why: &str) {
    if let (Some(now), Some(before)) = (now, before) {
        assert_eq!(now, before + more, "{why}");
    }
}

/// One scenario's set-up: a table of its own with `columns` (created directly), the
/// proxy and the client through it, a recording policy that retries everything, and the
/// count of connections handed back before the fault is armed (armed last, for one
/// COMMIT).
struct Stage<D: LostCommit> {
    direct: D::Direct,
    t: String,
    proxy: CommitFaultProxy,
    client: D::Client,
    seen: Seen,
    policy: RetryPolicy,
    before: Option<usize>,
}

impl<D: LostCommit> Stage<D> {
    async fn new(test: &str, prefix: &str, columns: &str) -> Option<Stage<D>> {
        let (url, direct) = D::setup(&format!("{} {test}", D::DRIVER)).await?;
        let t = txretry_testkit::unique_name(prefix);
        let columns = columns.replace("{TEXT}", D::TEXT);
        D::exec(
            &direct,
            format!("CREATE TABLE {t} ({columns}){}", D::TABLE_OPTIONS),
        )
        .await;
        let proxy = CommitFaultProxy::start(&url).expect("start the proxy");
        let client = D::via(&proxy).await;
        let seen = Seen::default();
        let policy = retry_everything(&seen);
        let before = D::released_so_far(&client).await;
        proxy.arm_commit_faults(1);
        Some(Stage {
            direct,
            t,
            proxy,
            client,
            seen,
            policy,
            before,
        })
    }

    /// `SELECT count(*) FROM` the table `WHERE {condition}`, read directly.
    async fn count(&self, condition: &str) -> i64 {
        let t = &self.t;
        D::count(
            &self.direct,
            format!("SELECT count(*) FROM {t} WHERE {condition}"),
        )
        .await
    }

    async fn drop_table(self) {
        D::exec(&self.direct, format!("DROP TABLE IF EXISTS {}", self.t)).await;
    }
}

/// The COMMIT lands, its answer is lost: ambiguous, the call is not run again, the row is
/// there once, the broken connection is not handed back, and the next call works on a new
/// one.
pub async fn ambiguous_and_not_rerun<D: LostCommit>() {
    // No key: a second run would show as a second row, not as a duplicate-key error.
    let Some(stage) = Stage::<D>::new("commit fault", "commit_fault", "note {TEXT} NOT NULL").await
    else {
        return;
    };
    let Stage {
        t,
        proxy,
        client,
        seen,
        policy,
        before,
        ..
    } = &stage;
    let mut sessions = Vec::new();
    let err = within(D::transaction(
        client,
        policy,
        &TxOptions::new(),
        &mut sessions,
        &format!("INSERT INTO {t} VALUES ('order 17')"),
    ))
    .await
    .expect_err("the proxy answers the COMMIT with a connection error");

    assert_ambiguous_commit::<D>(&err);
    assert_eq!(sessions.len(), 1, "an ambiguous COMMIT is not run again");
    assert!(seen.all().is_empty(), "no retry was scheduled");
    assert_eq!(
        seen.gave_up(),
        [err.outcome().clone()],
        "the give-up hook saw the ambiguous outcome once"
    );
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 1, "one COMMIT went through the proxy");
    // Read over a direct connection: the COMMIT landed, exactly once.
    assert_eq!(stage.count("1 = 1").await, 1);

    // The broken connection was closed, not handed back to the pool…
    assert_released(
        D::released_so_far(client).await,
        *before,
        1,
        "only the reading's own connection: the runner discarded the one the COMMIT failed on",
    );
    // …and the next call works, on a new one.
    let mut next = Vec::new();
    D::transaction(
        client,
        &RetryPolicy::disabled(),
        &TxOptions::new(),
        &mut next,
        &format!("INSERT INTO {t} VALUES ('order 18')"),
    )
    .await
    .expect("a fresh connection from the pool");
    assert_eq!(next.len(), 1);
    assert_ne!(
        next[0], sessions[0],
        "the next call ran on a new connection"
    );
    assert_eq!(stage.count("1 = 1").await, 2);
    stage.drop_table().await;
}

/// A call declared idempotent is run again after the ambiguous COMMIT, on a new
/// connection; keyed by a fixed id, the second run changes nothing: the row is there once.
pub async fn idempotent_call_retried<D: LostCommit>() {
    let Some(stage) = Stage::<D>::new(
        "commit fault idempotent",
        "commit_fault_idem",
        "id int PRIMARY KEY, note {TEXT} NOT NULL",
    )
    .await
    else {
        return;
    };
    let Stage {
        t,
        proxy,
        client,
        seen,
        policy,
        before,
        ..
    } = &stage;
    let options = TxOptions::new().idempotent(true);
    let mut sessions = Vec::new();
    let inserted = within(D::transaction(
        client,
        policy,
        &options,
        &mut sessions,
        &D::insert_once(t, "18, 'order 18'"),
    ))
    .await
    .expect("the idempotent call is retried and commits");

    assert_eq!(sessions.len(), 2, "two attempts: {sessions:?}");
    assert_ne!(
        sessions[0], sessions[1],
        "the second attempt ran on a new connection: the broken one was discarded"
    );
    assert_eq!(
        inserted, 0,
        "the first COMMIT had landed; the retry found the row"
    );
    assert_released(
        D::released_so_far(client).await,
        *before,
        2,
        "the reading's own and the second attempt's: the first attempt's was discarded",
    );
    // The runner retried the ambiguous COMMIT once, because the call is idempotent.
    let judged = seen.judged();
    assert_eq!(judged.len(), 1, "{judged:?}");
    assert_eq!(judged[0].verdict, Verdict::Ambiguous);
    assert_eq!(judged[0].code, D::lost_commit_code());
    assert_eq!(judged[0].phase, Phase::Commit);
    assert!(seen.gave_up().is_empty());
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(proxy.commits_seen(), 2);
    assert_eq!(stage.count("1 = 1").await, 1, "the row exists once");
    assert_eq!(
        stage.count("id = 18 AND note = 'order 18'").await,
        1,
        "the row is the one the call wrote"
    );
    stage.drop_table().await;
}

/// A call declared idempotent whose retry after the ambiguous COMMIT then fails another
/// way (here: the key the first COMMIT wrote, refused): the first COMMIT may have landed
/// (it did), so the outcome says so, whatever the last attempt's verdict. It said "not
/// committed" when only the last attempt counted.
pub async fn retry_failing_after_an_ambiguous_commit<D: LostCommit>() {
    let Some(stage) = Stage::<D>::new(
        "commit fault then refused",
        "commit_fault_refused",
        "id int PRIMARY KEY, note {TEXT} NOT NULL",
    )
    .await
    else {
        return;
    };
    let Stage {
        t, client, policy, ..
    } = &stage;
    let options = TxOptions::new().idempotent(true);
    let mut sessions = Vec::new();
    let err = within(D::transaction(
        client,
        policy,
        &options,
        &mut sessions,
        &format!("INSERT INTO {t} VALUES (19, 'order 19')"),
    ))
    .await
    .expect_err("the retry meets the row the first COMMIT wrote");

    assert_eq!(sessions.len(), 2, "two attempts: {sessions:?}");
    let outcome = err.outcome();
    let verdicts: Vec<Verdict> = outcome.history().iter().map(|a| a.verdict).collect();
    assert_eq!(
        verdicts,
        [Verdict::Ambiguous, Verdict::Permanent],
        "{err:?}"
    );
    assert!(
        outcome.may_have_committed(),
        "the first COMMIT may have landed: {err:?}"
    );
    assert_eq!(stage.count("1 = 1").await, 1, "it did, once");
    stage.drop_table().await;
}

/// The `#[test]` functions of this module for driver `$d`, where it is called.
macro_rules! lost_commit_tests {
    ($d:ty) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn commit_answered_with_a_connection_error_is_ambiguous_and_not_rerun() {
            crate::lost_commit::ambiguous_and_not_rerun::<$d>().await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn idempotent_call_retries_an_ambiguous_commit() {
            crate::lost_commit::idempotent_call_retried::<$d>().await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_retry_failing_after_an_ambiguous_commit_may_have_committed() {
            crate::lost_commit::retry_failing_after_an_ambiguous_commit::<$d>().await;
        }
    };
}

pub(crate) use lost_commit_tests;
