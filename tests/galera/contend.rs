//! One contended run: the winner on node 1, the loser's runner on node 2 through a
//! [`Pool`] of either driver, meeting the conflict at COMMIT or at a statement; what the
//! driver saw, and the check that it was a deadlock the runner retried.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use mysql_async::prelude::*;
use sqlx::mysql::MySqlPoolOptions;
use tokio::sync::Barrier;
use txretry::{Classifier, Code, Outcome, Phase, RetryPolicy, TransientKind, Verdict};
use txretry_testkit::wait::within;

use crate::cluster::{SERIAL, conflicts, node, node_opts, value};
use crate::failures::{Driver, Failure, policy};

/// Where the loser's first attempt meets the winner's commit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Meet {
    /// The loser sends COMMIT right after the winner committed.
    AtCommit,
    /// The loser runs one more statement once its node has applied the winner's write set.
    AtStatement,
}

/// How one contended run went.
pub(crate) struct Contended {
    /// The loser's runner: its attempts, or the outcome it gave up with.
    pub(crate) result: Result<u32, Outcome>,
    pub(crate) failures: Vec<Failure>,
    /// Row 1 at the end, read on node 3.
    pub(crate) value: i64,
    /// Node 2's certification failures and brute-force aborts during the run.
    pub(crate) cert_failures: u64,
    pub(crate) bf_aborts: u64,
}

/// The winner adds 10 to row 1 on node 1 with a plain connection; the loser, a runner on
/// node 2 with `classifier`, adds 1. Both update before either commits; the winner commits
/// first; then the loser meets the conflict as `meet` says.
pub(crate) async fn contend(
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
pub(crate) enum Pool {
    Sqlx(sqlx::MySqlPool),
    MysqlAsync(mysql_async::Pool),
}

impl Pool {
    pub(crate) async fn connect(driver: Driver, url: &str) -> Pool {
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

    pub(crate) async fn close(self) {
        match self {
            Pool::Sqlx(pool) => pool.close().await,
            Pool::MysqlAsync(pool) => pool.disconnect().await.expect("disconnect"),
        }
    }

    /// One runner call: each attempt runs `update`, then `read` when `then_read` (called
    /// once per attempt, after the update) says so.
    pub(crate) async fn transaction(
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
pub(crate) async fn loser(
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
pub(crate) fn show(driver: Driver, meet: Meet, run: &Contended) {
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
pub(crate) fn assert_deadlock_retried(run: &Contended, phase: Phase) {
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
