//! The commit boundary through txretry-testkit's `CommitFaultProxy` for sqlx, on
//! PostgreSQL and on MySQL (each binary's `dialect` module says how they differ): the
//! scenarios of `tests/shared/lost_commit.rs`. sqlx pings a connection handed back to the
//! pool and closes it if that fails, so the test counts the connections the runner handed
//! back (`after_release` runs only for those, not for one the runner discarded): that is
//! what tells the runner's own decision apart.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use txretry::{Code, RetryPolicy, TxError, TxOptions};
use txretry_testkit::CommitFaultProxy;

use crate::common::{exec, setup, sql};
use crate::dialect::{self, DRIVER, Pool, PoolOptions, SESSION_ID, SessionId, TABLE_OPTIONS, TEXT};
use crate::lost_commit::{LostCommit, lost_commit_tests};

/// sqlx for the lost-COMMIT scenarios.
pub struct Sqlx;

impl LostCommit for Sqlx {
    const DRIVER: &'static str = DRIVER;
    const TEXT: &'static str = TEXT;
    const TABLE_OPTIONS: &'static str = TABLE_OPTIONS;
    type Direct = Pool;
    /// The pool, and the count of connections handed back to it.
    type Client = (Pool, Arc<AtomicUsize>);
    type Error = sqlx::Error;
    type SessionId = SessionId;

    async fn setup(test: &str) -> Option<(String, Pool)> {
        setup(test, 2).await
    }

    async fn exec(direct: &Pool, text: String) {
        exec(direct, text).await;
    }

    async fn count(direct: &Pool, text: String) -> i64 {
        sqlx::query_scalar(sql(text))
            .fetch_one(direct)
            .await
            .unwrap()
    }

    async fn via(proxy: &CommitFaultProxy) -> (Pool, Arc<AtomicUsize>) {
        let released = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&released);
        let pool = PoolOptions::new()
            .max_connections(1)
            .test_before_acquire(false)
            .after_release(move |_, _| {
                count.fetch_add(1, Ordering::SeqCst);
                Box::pin(async { Ok(true) })
            })
            .connect(proxy.url())
            .await
            .unwrap();
        (pool, released)
    }

    async fn released_so_far((pool, released): &(Pool, Arc<AtomicUsize>)) -> Option<usize> {
        let conn = pool.acquire().await.unwrap();
        let n = released.load(Ordering::SeqCst);
        drop(conn);
        Some(n)
    }

    async fn transaction(
        (pool, _): &(Pool, Arc<AtomicUsize>),
        policy: &RetryPolicy,
        options: &TxOptions,
        sessions: &mut Vec<SessionId>,
        text: &str,
    ) -> Result<u64, TxError<sqlx::Error>> {
        txretry::sqlx::transaction_with(pool, policy, options, async |tx| {
            let session: SessionId = sqlx::query_scalar(SESSION_ID).fetch_one(&mut **tx).await?;
            sessions.push(session);
            let done = sqlx::query(sql(text.to_owned())).execute(&mut **tx).await?;
            Ok::<_, sqlx::Error>(done.rows_affected())
        })
        .await
    }

    fn insert_once(t: &str, values: &str) -> String {
        dialect::insert_once(t, values)
    }

    fn lost_commit_code() -> Option<Code> {
        dialect::lost_commit_code()
    }

    fn assert_lost_commit_error(err: &sqlx::Error) {
        dialect::assert_lost_commit_error(err);
    }
}

lost_commit_tests!(Sqlx);
