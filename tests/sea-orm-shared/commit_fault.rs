//! The commit boundary through txretry-testkit's `CommitFaultProxy` for SeaORM, on
//! PostgreSQL and on MySQL (each binary's `dialect` module says how they differ): the
//! scenarios of `tests/shared/lost_commit.rs`.
//!
//! SeaORM gives the runner no connection of its own to close, and no hook to count the
//! connections handed back to its pool: these tests show that the broken connection does
//! not come back from SeaORM's pool of one by the next call's running on a new session
//! (sqlx pings a connection handed back and closes it when that fails;
//! `test_before_acquire` is off, so nothing else would catch it).

use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbErr};
use txretry::{Code, RetryPolicy, TxError, TxOptions};
use txretry_testkit::CommitFaultProxy;

use crate::common::{exec, scalar, setup};
use crate::dialect::{self, DRIVER, SESSION_ID, SessionId, TABLE_OPTIONS, TEXT};
use crate::lost_commit::{LostCommit, lost_commit_tests};

/// SeaORM for the lost-COMMIT scenarios.
pub struct SeaOrm;

impl LostCommit for SeaOrm {
    const DRIVER: &'static str = DRIVER;
    const TEXT: &'static str = TEXT;
    const TABLE_OPTIONS: &'static str = TABLE_OPTIONS;
    type Direct = DatabaseConnection;
    type Client = DatabaseConnection;
    type Error = DbErr;
    type SessionId = SessionId;

    async fn setup(test: &str) -> Option<(String, DatabaseConnection)> {
        setup(test, 2).await
    }

    async fn exec(direct: &DatabaseConnection, sql: String) {
        exec(direct, sql).await;
    }

    async fn count(direct: &DatabaseConnection, sql: String) -> i64 {
        scalar(direct, sql).await
    }

    async fn via(proxy: &CommitFaultProxy) -> DatabaseConnection {
        let mut options = ConnectOptions::new(proxy.url());
        options
            .max_connections(1)
            .test_before_acquire(false)
            .sqlx_logging(false);
        Database::connect(options).await.unwrap()
    }

    /// SeaORM does not tell.
    async fn released_so_far(_: &DatabaseConnection) -> Option<usize> {
        None
    }

    async fn transaction(
        db: &DatabaseConnection,
        policy: &RetryPolicy,
        options: &TxOptions,
        sessions: &mut Vec<SessionId>,
        sql: &str,
    ) -> Result<u64, TxError<DbErr>> {
        txretry::sea_orm::transaction_with(db, policy, options, async |tx| {
            let session: SessionId = scalar(tx, SESSION_ID.to_owned()).await;
            sessions.push(session);
            let done = tx.execute_unprepared(sql).await?;
            Ok::<_, DbErr>(done.rows_affected())
        })
        .await
    }

    fn insert_once(t: &str, values: &str) -> String {
        dialect::insert_once(t, values)
    }

    fn lost_commit_code() -> Option<Code> {
        dialect::lost_commit_code()
    }

    fn assert_lost_commit_error(err: &DbErr) {
        dialect::assert_lost_commit_error(err);
    }
}

lost_commit_tests!(SeaOrm);
