//! The scenarios on SQLite: a database file in WAL mode, writers serialised by the runner's
//! `BEGIN IMMEDIATE` (a duplicate waits in SQLite's busy handler).

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

pub struct Fx {
    pub pool: SqlitePool,
    _dir: tempfile::TempDir,
}

pub async fn fixture(_test: &str) -> Option<Fx> {
    let dir = tempfile::tempdir().unwrap();
    let pool = SqlitePoolOptions::new()
        .max_connections(17)
        .connect_with(
            SqliteConnectOptions::new()
                .filename(dir.path().join("once.db"))
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(std::time::Duration::from_secs(20)),
        )
        .await
        .unwrap();
    Some(Fx { pool, _dir: dir })
}

/// SQLite's waiters sit in its busy handler, which nothing reports.
pub async fn waiting(_: &Fx, _: &str) -> Option<i64> {
    None
}

pub fn age_record(records: &str, key: &str) -> String {
    format!(
        "UPDATE {records} SET created_at = strftime('%Y-%m-%d %H:%M:%f', 'now', '-2 hours') \
         WHERE call_key = '{key}'"
    )
}

/// SQLITE_CONSTRAINT_PRIMARYKEY.
pub const UNIQUE_KIND: &str = "SQLite code 1555";

/// One writer at a time: nothing queues on the row.
pub const HANDOFF_DEADLOCKS: bool = false;

once_suite!(sqlx::Sqlite);

/// A `once` call that could not be confirmed says that repeating it with the same key is
/// safe, instead of "check before trying again".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconfirmed_once_call_says_a_repeat_with_the_same_key_is_safe() {
    let fx = fixture("once unconfirmed").await.unwrap();
    let pool = fx.pool.clone();
    let tool = Tool::new("stuck", "", move |ctx: ToolContext, _: Args| {
        let pool = pool.clone();
        async move {
            ctx.once(&pool, async move |_tx| {
                std::future::pending::<()>().await;
                Ok::<_, BoxError>(())
            })
            .await
        }
    })
    .timeout(Duration::from_millis(50))
    .once(Once::new());
    let toolbox = Toolbox::builder()
        .policy(fast(2))
        .tool(tool)
        .build()
        .unwrap();
    let result = within(toolbox.invoke(&anyone(), "stuck", json!({"item": 1}), "call-x")).await;
    let Err(InvokeError::Failed(failure)) = &result else {
        panic!("{result:?}");
    };
    assert_eq!(failure.kind(), FailureKind::TimedOut);
    assert_eq!(
        failure.attempts().len(),
        2,
        "a once call's timeout is retried"
    );
    assert_eq!(
        failure.to_string(),
        "stuck: could not confirm the outcome after 2 attempts; calling again with the same \
         key is safe: it returns the outcome if the change was made, or makes it"
    );
}
