//! What `once` refuses, on SQLite: a second transaction in one run (before it begins), a
//! transaction committed outside `ToolContext::once` (before it: the once transaction is
//! refused; after it: the run is reported), `once` on tools that cannot be (at build time),
//! an invalid table name, a key that cannot be had, and `ToolContext::once` in a tool not
//! declared `once`.

use serde_json::json;
use sqlx::SqlitePool;
use txretry_tool::{
    BoxError, BuildError, InvokeError, Once, OnceError, OnceRefused, Tool, ToolContext, Toolbox,
};

use crate::common::{Args, Counter, anyone, fast, unique_name};

/// A SQLite database file of the test's own.
struct Fx {
    pool: SqlitePool,
    _dir: tempfile::TempDir,
}

async fn fixture(_test: &str) -> Option<Fx> {
    let dir = tempfile::tempdir().unwrap();
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(dir.path().join("once.db"))
        .create_if_missing(true)
        .busy_timeout(std::time::Duration::from_secs(20));
    let pool = SqlitePool::connect_with(options).await.unwrap();
    Some(Fx { pool, _dir: dir })
}

async fn effects(pool: &SqlitePool) -> String {
    let t = unique_name("once_effects");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE TABLE {t} (item BIGINT NOT NULL, note VARCHAR(100) NOT NULL)"
    )))
    .execute(pool)
    .await
    .unwrap();
    t
}

async fn count(pool: &SqlitePool, t: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {t}")))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// How a handler writes: in `ToolContext::once`, or in a plain runner under the
/// invocation's policy (outside the record).
#[derive(Clone, Copy, Debug)]
enum Step {
    Once,
    Plain,
}

/// A `once` tool whose handler runs `steps` in order, each inserting a row tagged with its
/// position; `once_runs` counts the runs of `ToolContext::once` closures.
fn steps_tool(pool: &SqlitePool, t: &str, steps: &'static [Step], once_runs: &Counter) -> Tool {
    let (pool, t, once_runs) = (pool.clone(), t.to_owned(), once_runs.clone());
    Tool::new("steps", "", move |ctx: ToolContext, _: Args| {
        let (pool, t, once_runs) = (pool.clone(), t.clone(), once_runs.clone());
        async move {
            for (i, step) in steps.iter().enumerate() {
                let sql = format!("INSERT INTO {t} VALUES ({i}, '{step:?}')");
                match step {
                    Step::Once => {
                        let once_runs = once_runs.clone();
                        ctx.once(&pool, async move |tx| {
                            once_runs.bump();
                            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                                .execute(&mut **tx)
                                .await?;
                            Ok::<_, BoxError>(i)
                        })
                        .await?;
                    }
                    Step::Plain => {
                        txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                            sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
                                .execute(&mut **tx)
                                .await
                        })
                        .await?;
                    }
                }
            }
            Ok::<_, BoxError>("done")
        }
    })
    .once(Once::new().table(&unique_name("once_calls")).unwrap())
}

async fn refusal(steps: &'static [Step]) -> (InvokeError, i64, u32) {
    let fx = fixture("once refused").await.unwrap();
    let t = effects(&fx.pool).await;
    let once_runs = Counter::default();
    let toolbox = Toolbox::builder()
        .policy(fast(3))
        .tool(steps_tool(&fx.pool, &t, steps, &once_runs))
        .build()
        .unwrap();
    let err = toolbox
        .invoke(&anyone(), "steps", json!({"item": 1}), "call-1")
        .await
        .unwrap_err();
    (err, count(&fx.pool, &t).await, once_runs.get())
}

/// Why the `steps` tool's call was refused.
fn reason(err: &InvokeError) -> &OnceRefused {
    let InvokeError::OnceRefused { tool, reason } = err else {
        panic!("{err:?}");
    };
    assert_eq!(tool, "steps");
    reason
}

#[tokio::test]
async fn a_second_once_transaction_in_one_run_is_refused_before_it_begins() {
    let (err, rows, once_runs) = refusal(&[Step::Once, Step::Once]).await;
    assert_eq!(*reason(&err), OnceRefused::SecondTransaction);
    assert!(
        err.to_string().contains("second ToolContext::once"),
        "{err}"
    );
    assert_eq!(once_runs, 1, "the second closure never ran");
    assert_eq!(rows, 1, "the first transaction's work stands, once");
}

#[tokio::test]
async fn a_transaction_committed_before_the_once_one_makes_it_refused_before_it_begins() {
    let (err, rows, once_runs) = refusal(&[Step::Plain, Step::Once]).await;
    assert_eq!(
        *reason(&err),
        OnceRefused::CommittedOutside { transactions: 1 }
    );
    assert_eq!(once_runs, 0, "the once transaction never began");
    assert_eq!(rows, 1);
}

#[tokio::test]
async fn a_transaction_committed_after_the_once_one_is_reported_when_the_run_ends() {
    let (err, rows, once_runs) = refusal(&[Step::Once, Step::Plain]).await;
    assert_eq!(
        *reason(&err),
        OnceRefused::CommittedOutside { transactions: 1 }
    );
    assert!(
        err.to_string().contains("1 other transaction committed"),
        "{err}"
    );
    assert_eq!(once_runs, 1);
    assert_eq!(
        rows, 2,
        "the runner cannot be stopped before it begins: see the report"
    );
}

#[tokio::test]
async fn a_once_tool_that_commits_only_outside_once_is_refused() {
    let (err, _, once_runs) = refusal(&[Step::Plain]).await;
    assert_eq!(
        *reason(&err),
        OnceRefused::CommittedOutside { transactions: 1 }
    );
    assert_eq!(once_runs, 0);
}

#[test]
fn once_on_a_read_only_tool_is_refused_at_build_time_and_allowed_on_a_blocking_one() {
    let read_only = Tool::new("r", "", |_: ToolContext, _: Args| async {
        Ok::<_, BoxError>(1)
    })
    .read_only(true)
    .once(Once::new());
    let err = Toolbox::builder().tool(read_only).build().unwrap_err();
    assert!(matches!(&err, BuildError::OnceNotAllowed { tool, .. } if tool == "r"));
    assert!(err.to_string().contains("read-only"), "{err}");

    // `ToolContext::once_rusqlite` is blocking: a blocking tool may be `once`.
    let blocking =
        Tool::blocking("b", "", |_: ToolContext, _: Args| Ok::<_, BoxError>(1)).once(Once::new());
    let toolbox = Toolbox::builder().tool(blocking).build().unwrap();
    assert!(toolbox.offered(&anyone())[0].is_once());
}

/// Blocking tools opt in with their own `Tool::once`: a toolbox-wide `once` leaves them as
/// they were.
#[test]
fn a_toolbox_wide_once_covers_async_writers_only() {
    let tool = |name: &str| {
        Tool::new(name, "", |_: ToolContext, _: Args| async {
            Ok::<_, BoxError>(1)
        })
    };
    let toolbox = Toolbox::builder()
        .once(Once::new())
        .tool(tool("writer"))
        .tool(tool("reader").read_only(true))
        .tool(tool("opted_out").without_once())
        .tool(Tool::blocking("blocking", "", |_: ToolContext, _: Args| {
            Ok::<_, BoxError>(1)
        }))
        .build()
        .unwrap();
    let once: Vec<(&str, bool)> = toolbox
        .offered(&anyone())
        .into_iter()
        .map(|d| (d.name(), d.is_once()))
        .collect();
    assert_eq!(
        once,
        [
            ("writer", true),
            ("reader", false),
            ("opted_out", false),
            ("blocking", false)
        ]
    );
}

#[test]
fn an_invalid_table_name_is_a_typed_error() {
    for name in ["", "9lives", "calls; DROP TABLE orders", "a.b", "\"calls\""] {
        let err = Once::new().table(name).unwrap_err();
        assert_eq!(err.name(), name);
        assert!(err.to_string().starts_with("invalid table name"), "{err}");
    }
    assert_eq!(
        Once::new().table("agent_calls").unwrap().table_name(),
        "agent_calls"
    );
}

#[tokio::test]
async fn a_key_that_cannot_be_had_is_refused_before_the_handler_runs() {
    let runs = Counter::default();
    let tool = |name: &str, once: Once| {
        let runs = runs.clone();
        Tool::new(name, "", move |_: ToolContext, _: Args| {
            runs.bump();
            async { Ok::<_, BoxError>(1) }
        })
        .once(once)
    };
    #[derive(serde::Deserialize)]
    struct Other {
        #[allow(dead_code)]
        order: String,
    }
    let toolbox = Toolbox::builder()
        .tool(tool("empty", Once::key_from_args(|_: &Args| String::new())))
        .tool(tool(
            "unfit",
            Once::key_from_args(|o: &Other| o.order.clone()),
        ))
        .tool(tool("by_call", Once::new()))
        .build()
        .unwrap();
    // A NUL character: JSON strings may hold one, Postgres text may not.
    for (name, call_id) in [
        ("empty", "c"),
        ("unfit", "c"),
        ("by_call", ""),
        ("by_call", "a\0b"),
    ] {
        let err = toolbox
            .invoke(&anyone(), name, json!({"item": 1}), call_id)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                InvokeError::OnceRefused {
                    reason: OnceRefused::InvalidKey(_),
                    ..
                }
            ),
            "{name}: {err:?}"
        );
    }
    let long = "k".repeat(256);
    let err = toolbox
        .invoke(&anyone(), "by_call", json!({"item": 1}), &long)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("256 bytes"), "{err}");
    assert_eq!(runs.get(), 0);
}

#[tokio::test]
async fn once_in_a_tool_not_declared_once_is_refused() {
    let fx = fixture("once not declared").await.unwrap();
    let pool = fx.pool.clone();
    let toolbox = Toolbox::builder()
        .tool(Tool::new("plain", "", move |ctx: ToolContext, _: Args| {
            let pool = pool.clone();
            async move {
                assert_eq!(ctx.once_key(), None);
                let result = ctx.once(&pool, async move |_tx| Ok::<_, BoxError>(1)).await;
                assert!(
                    matches!(result, Err(OnceError::Refused(OnceRefused::NotDeclared))),
                    "{result:?}"
                );
                result.map_err(BoxError::from)
            }
        }))
        .build()
        .unwrap();
    let err = toolbox
        .invoke(&anyone(), "plain", json!({"item": 1}), "c")
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("only for tools declared once"),
        "{err}"
    );
}
