//! A distributed engine: a three-node Galera cluster (MariaDB 10.11 + galera-4), through
//! the sqlx-mysql and mysql_async runners (`TXRETRY_GALERA_URLS`, or three containers; see
//! txretry-testkit's `galera_cluster`). Ignored by the plain test run (no cluster there, and
//! a skipped test must not count as passed); `.ci/containers` runs them with
//! `--include-ignored` and `TXRETRY_REQUIRE_GALERA=1`.
//!
//! Two writers on different nodes update the same row. Each node grants its own row locks,
//! so both get as far as COMMIT; the cluster orders the write sets, and the later one loses:
//! it fails certification at COMMIT, or, when the winner's write set is applied on the
//! loser's node first, the applier aborts it ("brute force"). Either way both drivers see
//! errno 1213, SQLSTATE 40001, "Deadlock found when trying to get lock; try restarting
//! transaction": at COMMIT, or at the next statement when the abort came while the
//! transaction was idle. The default classifier retries both (a server's own answer at
//! COMMIT keeps its verdict: it says the transaction did not commit). `Profile::Galera`
//! adds 149 (never seen here) and states 1213 for classifiers built from
//! `Classifier::empty()`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_async::prelude::*;
use sqlx::mysql::{MySqlDatabaseError, MySqlPoolOptions};
use tokio::sync::Barrier;
use txretry::{
    Backoff, Classifier, Code, Jitter, Outcome, Phase, Profile, RetryPolicy, TransientKind, Verdict,
};
use txretry_testkit::wait::within;

/// The contended runs read each node's conflict counters: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The cluster's node URLs, or `None` when the test must skip (testkit printed why).
fn cluster(test: &str) -> Option<Vec<String>> {
    let urls = txretry_testkit::galera_cluster(test)?;
    assert!(urls.len() >= 3, "three nodes expected: {urls:?}");
    Some(urls)
}

/// The two drivers under test.
#[derive(Clone, Copy, Debug)]
enum Driver {
    Sqlx,
    MysqlAsync,
}

/// What a driver reported for one failed attempt, next to the runner's judgement.
#[derive(Clone, Debug)]
struct Failure {
    phase: Phase,
    verdict: Verdict,
    code: Option<Code>,
    /// The driver's own view: errno, SQLSTATE, message.
    errno: Option<u16>,
    sqlstate: Option<String>,
    message: String,
}

/// The failures a policy's `on_retry` hook saw (shared with the hook).
#[derive(Clone, Default)]
struct Failures(Arc<Mutex<Vec<Failure>>>);

impl Failures {
    fn all(&self) -> Vec<Failure> {
        self.0.lock().unwrap().clone()
    }
}

/// The driver's own view of an error: errno, SQLSTATE, message.
fn driver_view(error: &(dyn std::error::Error + 'static)) -> (Option<u16>, Option<String>, String) {
    if let Some(db) = error
        .downcast_ref::<sqlx::Error>()
        .and_then(sqlx::Error::as_database_error)
    {
        let errno = db
            .try_downcast_ref::<MySqlDatabaseError>()
            .map(MySqlDatabaseError::number);
        return (
            errno,
            db.code().map(|c| c.into_owned()),
            db.message().to_owned(),
        );
    }
    if let Some(mysql_async::Error::Server(server)) = error.downcast_ref::<mysql_async::Error>() {
        return (
            Some(server.code),
            Some(server.state.clone()),
            server.message.clone(),
        );
    }
    (None, None, error.to_string())
}

/// A policy of `attempts` attempts (1 ms × 2ⁿ backoff, capped at 20 ms, full jitter) with
/// `classifier`, whose `on_retry` hook records into the returned [`Failures`].
fn policy(attempts: u32, classifier: Classifier) -> (RetryPolicy, Failures) {
    let failures = Failures::default();
    let sink = failures.clone();
    let policy = RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Exponential {
            initial: Duration::from_millis(1),
            factor: 2.0,
        })
        .max_delay(Duration::from_millis(20))
        .jitter(Jitter::Full)
        .classifier(classifier)
        .on_retry(move |event| {
            let (errno, sqlstate, message) = driver_view(event.error);
            sink.0.lock().unwrap().push(Failure {
                phase: event.phase,
                verdict: event.verdict,
                code: event.code,
                errno,
                sqlstate,
                message,
            });
        })
        .build()
        .unwrap();
    (policy, failures)
}

/// mysql_async options for one node. `prefer_socket` off: by default mysql_async asks the
/// server for its `@@socket` and reconnects through that path on this machine, which on a
/// host with a MariaDB of its own reaches that server instead of the node.
fn node_opts(url: &str) -> mysql_async::Opts {
    let opts = mysql_async::Opts::from_url(url).expect("a mysql:// URL");
    mysql_async::OptsBuilder::from_opts(opts)
        .prefer_socket(false)
        .into()
}

/// A plain mysql_async connection to one node; reads on it wait until the node has
/// applied every write set the cluster committed before the read (`wsrep_sync_wait=1`).
async fn node(url: &str) -> mysql_async::Conn {
    let mut conn = mysql_async::Conn::new(node_opts(url))
        .await
        .expect("connect to a node");
    conn.query_drop("SET SESSION wsrep_sync_wait = 1")
        .await
        .expect("causal reads");
    conn
}

/// Creates `{t} (id, v)` with row 1, v = 0, on node 1, and waits until node 2 has it.
async fn counter_table(urls: &[String], t: &str) {
    let mut first = node(&urls[0]).await;
    first
        .query_drop(format!(
            "CREATE TABLE {t} (id INT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB"
        ))
        .await
        .expect("create table");
    first
        .query_drop(format!("INSERT INTO {t} VALUES (1, 0)"))
        .await
        .expect("insert row");
    for url in &urls[1..] {
        let n: Option<i64> = node(url)
            .await
            .query_first(format!("SELECT count(*) FROM {t}"))
            .await
            .expect("read on another node");
        assert_eq!(n, Some(1), "the row replicated");
    }
}

/// Row 1's value, read on `url` after everything committed before has been applied there.
async fn value(url: &str, t: &str) -> i64 {
    node(url)
        .await
        .query_first(format!("SELECT v FROM {t} WHERE id = 1"))
        .await
        .expect("read the counter")
        .expect("the row exists")
}

async fn drop_table(url: &str, t: &str) {
    node(url)
        .await
        .query_drop(format!("DROP TABLE IF EXISTS {t}"))
        .await
        .expect("drop table");
}

/// `wsrep_local_cert_failures` and `wsrep_local_bf_aborts` of a node: how its local
/// transactions lost (certification at COMMIT, or aborted by the applier).
async fn conflicts(url: &str) -> (u64, u64) {
    let mut conn = node(url).await;
    let mut status = async |name: &str| -> u64 {
        let row: Option<(String, u64)> = conn
            .query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'"))
            .await
            .expect("wsrep status");
        row.unwrap_or_else(|| panic!("no status {name}")).1
    };
    (
        status("wsrep_local_cert_failures").await,
        status("wsrep_local_bf_aborts").await,
    )
}

/// Where the loser's first attempt meets the winner's commit.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Meet {
    /// The loser sends COMMIT right after the winner committed.
    AtCommit,
    /// The loser runs one more statement once its node has applied the winner's write set.
    AtStatement,
}

/// How one contended run went.
struct Contended {
    /// The loser's runner: its attempts, or the outcome it gave up with.
    result: Result<u32, Outcome>,
    failures: Vec<Failure>,
    /// Row 1 at the end, read on node 3.
    value: i64,
    /// Node 2's certification failures and brute-force aborts during the run.
    cert_failures: u64,
    bf_aborts: u64,
}

/// The winner adds 10 to row 1 on node 1 with a plain connection; the loser, a runner on
/// node 2 with `classifier`, adds 1. Both update before either commits; the winner commits
/// first; then the loser meets the conflict as `meet` says.
async fn contend(
    urls: &[String],
    t: &str,
    driver: Driver,
    classifier: Classifier,
    meet: Meet,
) -> Contended {
    let _serial = SERIAL.lock().await;
    let before = conflicts(&urls[1]).await;
    let (policy, failures) = policy(5, classifier);
    let barrier = Arc::new(Barrier::new(2));
    let winner = {
        let (url, barrier, t) = (urls[0].clone(), barrier.clone(), t.to_owned());
        let loser_node = urls[1].clone();
        tokio::spawn(async move {
            let mut conn = node(&url).await;
            let mut tx = conn
                .start_transaction(mysql_async::TxOpts::default())
                .await
                .expect("begin");
            tx.query_drop(format!("UPDATE {t} SET v = v + 10 WHERE id = 1"))
                .await
                .expect("the winner's update");
            barrier.wait().await; // both have updated the row, each on its own node
            tx.commit().await.expect("the winner commits");
            if meet == Meet::AtStatement {
                // A causal read on the loser's node returns once the winner's write set
                // is applied there, which aborts the loser's open transaction.
                value(&loser_node, &t).await;
            }
            barrier.wait().await; // the loser may go on
        })
    };
    let result = loser(&urls[1], t, driver, &policy, &barrier, meet).await;
    within(winner).await.expect("the winner's task");
    let after = conflicts(&urls[1]).await;
    Contended {
        result,
        failures: failures.all(),
        value: value(&urls[2], t).await,
        cert_failures: after.0 - before.0,
        bf_aborts: after.1 - before.1,
    }
}

/// A pool of one driver, on one node.
enum Pool {
    Sqlx(sqlx::MySqlPool),
    MysqlAsync(mysql_async::Pool),
}

impl Pool {
    async fn connect(driver: Driver, url: &str) -> Pool {
        match driver {
            Driver::Sqlx => Pool::Sqlx(
                MySqlPoolOptions::new()
                    .max_connections(2)
                    .connect(url)
                    .await
                    .expect("connect (sqlx)"),
            ),
            Driver::MysqlAsync => Pool::MysqlAsync(mysql_async::Pool::new(node_opts(url))),
        }
    }

    async fn close(self) {
        match self {
            Pool::Sqlx(pool) => pool.close().await,
            Pool::MysqlAsync(pool) => pool.disconnect().await.expect("disconnect"),
        }
    }

    /// One runner call: each attempt runs `update`, then `read` when `then_read` (called
    /// once per attempt, after the update) says so.
    async fn transaction(
        &self,
        policy: &RetryPolicy,
        update: &str,
        read: &str,
        then_read: impl AsyncFn() -> bool,
    ) -> Result<(), Outcome> {
        match self {
            Pool::Sqlx(pool) => txretry::sqlx::transaction(pool, policy, async |tx| {
                sqlx::query(sqlx::AssertSqlSafe(update.to_owned()))
                    .execute(&mut **tx)
                    .await?;
                if then_read().await {
                    sqlx::query(sqlx::AssertSqlSafe(read.to_owned()))
                        .execute(&mut **tx)
                        .await?;
                }
                Ok::<_, sqlx::Error>(())
            })
            .await
            .map_err(|e| e.outcome().clone()),
            Pool::MysqlAsync(pool) => txretry::mysql_async::transaction(pool, policy, async |tx| {
                tx.query_drop(update).await?;
                if then_read().await {
                    tx.query_drop(read).await?;
                }
                Ok::<_, mysql_async::Error>(())
            })
            .await
            .map_err(|e| e.outcome().clone()),
        }
    }
}

/// The loser's runner on `url`: its first attempt updates row 1, waits twice at `barrier`
/// (both updated; the winner committed), then, for [`Meet::AtStatement`], reads the row.
/// Its attempts, or the outcome it gave up with.
async fn loser(
    url: &str,
    t: &str,
    driver: Driver,
    policy: &RetryPolicy,
    barrier: &Barrier,
    meet: Meet,
) -> Result<u32, Outcome> {
    let attempts = AtomicU32::new(0);
    let pool = Pool::connect(driver, url).await;
    let result = within(pool.transaction(
        policy,
        &format!("UPDATE {t} SET v = v + 1 WHERE id = 1"),
        &format!("SELECT v FROM {t} WHERE id = 1"),
        async || {
            let first = attempts.fetch_add(1, Ordering::Relaxed) == 0;
            if first {
                barrier.wait().await;
                barrier.wait().await;
            }
            first && meet == Meet::AtStatement
        },
    ))
    .await;
    pool.close().await;
    result.map(|()| attempts.load(Ordering::Relaxed))
}

/// Prints what the driver saw, for the error-shape notes.
fn show(driver: Driver, meet: Meet, run: &Contended) {
    for f in &run.failures {
        println!(
            "{driver:?} {meet:?}: phase {:?}, verdict {}, code {:?}; driver: errno {:?}, SQLSTATE {:?}, {:?}",
            f.phase, f.verdict, f.code, f.errno, f.sqlstate, f.message
        );
    }
    println!(
        "{driver:?} {meet:?}: node 2 counted {} certification failure(s) and {} brute-force abort(s)",
        run.cert_failures, run.bf_aborts
    );
}

/// The loser's one failure: 1213 / 40001 from the driver, judged a deadlock in `phase`.
fn assert_deadlock_retried(run: &Contended, phase: Phase) {
    assert_eq!(
        run.result.as_ref().ok(),
        Some(&2),
        "retried once, then committed"
    );
    assert_eq!(run.failures.len(), 1, "{:?}", run.failures);
    let f = &run.failures[0];
    assert_eq!(f.phase, phase, "{f:?}");
    assert_eq!(
        f.verdict,
        Verdict::Transient(TransientKind::Deadlock),
        "{f:?}"
    );
    assert_eq!(f.code, Some(Code::MySql(1213)), "{f:?}");
    assert_eq!(f.errno, Some(1213), "{f:?}");
    assert_eq!(f.sqlstate.as_deref(), Some("40001"), "{f:?}");
    assert!(f.message.starts_with("Deadlock found"), "{f:?}");
    // The loser's node counted how it lost (a write set that fails certification after the
    // applier began aborting it counts under both).
    assert!(
        run.cert_failures + run.bf_aborts >= 1,
        "node 2 counted the conflict"
    );
    // The winner's 10 and the loser's 1, once: nothing lost, nothing doubled.
    assert_eq!(run.value, 11);
}

async fn conflict_at_commit_is_retried(test: &str, driver: Driver) {
    let Some(urls) = cluster(test) else {
        return;
    };
    let t = txretry_testkit::unique_name("galera_commit");
    counter_table(&urls, &t).await;
    let run = contend(&urls, &t, driver, Classifier::default(), Meet::AtCommit).await;
    show(driver, Meet::AtCommit, &run);
    assert_deadlock_retried(&run, Phase::Commit);
    drop_table(&urls[0], &t).await;
}

async fn brute_force_abort_at_a_statement_is_retried(test: &str, driver: Driver) {
    let Some(urls) = cluster(test) else {
        return;
    };
    let t = txretry_testkit::unique_name("galera_statement");
    counter_table(&urls, &t).await;
    let run = contend(&urls, &t, driver, Classifier::default(), Meet::AtStatement).await;
    show(driver, Meet::AtStatement, &run);
    assert_deadlock_retried(&run, Phase::Body);
    assert_eq!(run.bf_aborts, 1, "the applier aborted the idle transaction");
    drop_table(&urls[0], &t).await;
}

/// What the profile changes for a commit-time 1213: nothing over the default classifier
/// (both retry it); over `Classifier::empty()` it is what makes the runner retry at all.
async fn profile_over_an_empty_classifier(test: &str, driver: Driver) {
    let Some(urls) = cluster(test) else {
        return;
    };
    let t = txretry_testkit::unique_name("galera_profile");
    counter_table(&urls, &t).await;

    let bare = contend(&urls, &t, driver, Classifier::empty(), Meet::AtCommit).await;
    show(driver, Meet::AtCommit, &bare);
    let outcome = bare
        .result
        .expect_err("an unknown code is permanent: not retried");
    assert_eq!(outcome.verdict(), Verdict::Permanent, "{outcome:?}");
    assert_eq!(outcome.phase(), Phase::Commit, "{outcome:?}");
    assert_eq!(outcome.attempts(), 1, "{outcome:?}");
    assert_eq!(outcome.code(), Some(Code::MySql(1213)), "{outcome:?}");
    assert!(!outcome.may_have_committed(), "the server said it did not");
    assert_eq!(bare.value, 10, "only the winner's update");

    let profiled = Classifier::empty().with_profile(Profile::Galera);
    let run = contend(&urls, &t, driver, profiled, Meet::AtCommit).await;
    show(driver, Meet::AtCommit, &run);
    assert_eq!(run.result.as_ref().ok(), Some(&2), "{:?}", run.failures);
    assert_eq!(run.value, 21, "10 + 10 + 1");

    // Over the default classifier the profile changes no verdict for what Galera sent.
    let default = Classifier::default();
    let with_profile = Classifier::default().with_profile(Profile::Galera);
    let deadlock = Code::MySql(1213);
    assert_eq!(
        default.verdict_for(deadlock),
        with_profile.verdict_for(deadlock)
    );
    // 149 (HA_ERR_LOCK_DEADLOCK as an errno) is what it adds; no driver reported it here.
    assert_eq!(default.verdict_for(Code::MySql(149)), None);
    assert_eq!(
        with_profile.verdict_for(Code::MySql(149)),
        Some(Verdict::Transient(TransientKind::Deadlock))
    );
    drop_table(&urls[0], &t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Galera cluster: .ci/containers runs it"]
async fn sqlx_certification_conflict_at_commit_is_retried() {
    conflict_at_commit_is_retried("galera::sqlx_commit", Driver::Sqlx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Galera cluster: .ci/containers runs it"]
async fn mysql_async_certification_conflict_at_commit_is_retried() {
    conflict_at_commit_is_retried("galera::mysql_async_commit", Driver::MysqlAsync).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Galera cluster: .ci/containers runs it"]
async fn sqlx_brute_force_abort_at_a_statement_is_retried() {
    brute_force_abort_at_a_statement_is_retried("galera::sqlx_statement", Driver::Sqlx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Galera cluster: .ci/containers runs it"]
async fn mysql_async_brute_force_abort_at_a_statement_is_retried() {
    brute_force_abort_at_a_statement_is_retried(
        "galera::mysql_async_statement",
        Driver::MysqlAsync,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Galera cluster: .ci/containers runs it"]
async fn sqlx_galera_profile_over_an_empty_classifier() {
    profile_over_an_empty_classifier("galera::sqlx_profile", Driver::Sqlx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Galera cluster: .ci/containers runs it"]
async fn mysql_async_galera_profile_over_an_empty_classifier() {
    profile_over_an_empty_classifier("galera::mysql_async_profile", Driver::MysqlAsync).await;
}

/// Workers on every node increment one counter at once, half of them through each driver:
/// every increment lands exactly once, and each conflict Galera reported was a 1213 the
/// default classifier retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a Galera cluster: .ci/containers runs it"]
async fn writers_on_every_node_increment_one_counter_exactly_once() {
    const WORKERS_PER_NODE: usize = 2;
    const INCREMENTS: u32 = 25;
    let Some(urls) = cluster("galera::counter") else {
        return;
    };
    let _serial = SERIAL.lock().await;
    let t = txretry_testkit::unique_name("galera_counter");
    counter_table(&urls, &t).await;
    let mut before = Vec::new();
    for url in &urls {
        before.push(conflicts(url).await);
    }
    let (policy, failures) = policy(100, Classifier::default());
    // One thread drives every worker (the runners' futures borrow across awaits, so they
    // are not `Send` here); the concurrency that matters is the servers'.
    let local = tokio::task::LocalSet::new();
    let mut workers = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        for w in 0..WORKERS_PER_NODE {
            let driver = if (i + w) % 2 == 0 {
                Driver::Sqlx
            } else {
                Driver::MysqlAsync
            };
            let (url, t, policy) = (url.clone(), t.clone(), policy.clone());
            workers.push(local.spawn_local(async move {
                let pool = Pool::connect(driver, &url).await;
                let update = format!("UPDATE {t} SET v = v + 1 WHERE id = 1");
                for _ in 0..INCREMENTS {
                    pool.transaction(&policy, &update, "", async || false)
                        .await
                        .unwrap_or_else(|outcome| panic!("{driver:?} gave up: {outcome:?}"));
                }
                pool.close().await;
            }));
        }
    }
    within(local.run_until(async {
        for worker in workers {
            worker.await.expect("a worker");
        }
    }))
    .await;

    let expected = i64::from(INCREMENTS) * (urls.len() * WORKERS_PER_NODE) as i64;
    for url in &urls {
        assert_eq!(value(url, &t).await, expected, "on every node");
    }
    let failures = failures.all();
    let at_commit = failures.iter().filter(|f| f.phase == Phase::Commit).count();
    let (mut cert, mut bf) = (0, 0);
    for (url, (c0, b0)) in urls.iter().zip(before) {
        let (c1, b1) = conflicts(url).await;
        (cert, bf) = (cert + c1 - c0, bf + b1 - b0);
    }
    println!(
        "{expected} increments from {} workers on {} nodes: {} retries ({at_commit} at COMMIT, {} at a statement); the nodes counted {cert} certification failure(s) and {bf} brute-force abort(s)",
        urls.len() * WORKERS_PER_NODE,
        urls.len(),
        failures.len(),
        failures.len() - at_commit,
    );
    assert!(!failures.is_empty(), "writers on three nodes conflicted");
    for f in &failures {
        assert_eq!(
            f.verdict,
            Verdict::Transient(TransientKind::Deadlock),
            "{f:?}"
        );
        assert_eq!(f.code, Some(Code::MySql(1213)), "{f:?}");
    }
    drop_table(&urls[0], &t).await;
}
