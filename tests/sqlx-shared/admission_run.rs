//! [`Driver::run`](crate::admission::Driver::run) for sqlx on PostgreSQL and on MySQL (the
//! `admission_db` module of both binaries; each binary's `dialect` module says how they
//! differ).

use txretry::{RetryPolicy, TxOptions};

use crate::admission::{Driver, Failed, Said, Started, Then};
use crate::admission_db::Db;
use crate::dialect::{Pool, errno};

/// Runs one transaction on `pool`: each attempt sends its session's id to `started`,
/// then does what `then` says.
pub async fn run(
    pool: &Pool,
    policy: &RetryPolicy,
    options: &TxOptions,
    started: Started,
    then: Then,
) -> Result<(), Failed> {
    let server = Db::BINARY.server;
    txretry::sqlx::transaction_with(pool, policy, options, async move |tx| {
        let me: i64 = sqlx::query_scalar(server.session_id())
            .fetch_one(&mut **tx)
            .await?;
        // A test that does not look at the ids has dropped the receiver.
        let _ = started.send(me);
        match &then {
            Then::Commit => {}
            Then::WaitFor(release) => release.notified().await,
            Then::SleepInServer => {
                sqlx::query(server.sleep_a_minute())
                    .execute(&mut **tx)
                    .await?;
            }
            Then::Select(query, to) => {
                let selected: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(query.clone()))
                    .fetch_one(&mut **tx)
                    .await?;
                let _ = to.send(selected);
            }
            Then::Refuse => return Err(sqlx::Error::RowNotFound),
        }
        Ok::<_, sqlx::Error>(())
    })
    .await
    .map_err(|err| Failed::of(err, said))
}

/// What a sqlx error says: the database error's SQLSTATE, number and message.
fn said(err: &sqlx::Error) -> Said {
    let db = err.as_database_error();
    Said {
        sqlstate: db.and_then(|db| db.code()).map(|code| code.into_owned()),
        number: errno(err),
        message: db.map_or_else(|| err.to_string(), |db| db.message().to_string()),
    }
}
