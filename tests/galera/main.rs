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
//!
//! Here: the scenarios and the tests; `cluster.rs` (the nodes, the counter table, the
//! conflict counters), `failures.rs` (the drivers, the failures a policy records),
//! `contend.rs` (one contended run and its checks).

mod cluster;
mod contend;
mod failures;

use txretry::{Classifier, Code, Phase, Profile, TransientKind, Verdict};
use txretry_testkit::wait::within;

use cluster::{SERIAL, cluster, conflicts, counter_table, drop_table, value};
use contend::{Meet, Pool, assert_deadlock_retried, contend, show};
use failures::{Driver, policy};

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
