//! The server path, on PostgreSQL (TXRETRY_POSTGRES_URL; skipped without a server unless
//! TXRETRY_REQUIRE_DB=1): real deadlocks (40P01) from two sessions locking two rows in
//! opposite order, and real lock timeouts (55P03).

use serde_json::json;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection};
use tokio::sync::{mpsc, oneshot};
use txretry_core::{Code, Phase, SqlState, StopReason, TransientKind, Verdict};
use txretry_tool::{BoxError, FailureKind, Tool, ToolFailure, Toolbox};

use crate::common::{Counter, Events, call, failure, shared_tool, toolbox};

async fn setup(test: &str) -> Option<(String, PgPool)> {
    let url = txretry_testkit::postgres_url(test)?;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await
        .unwrap();
    Some((url, pool))
}

/// SQL with a table name from `unique_name` (ASCII letters, digits, `_`) spliced in.
fn sql(text: String) -> AssertSqlSafe<String> {
    AssertSqlSafe(text)
}

async fn exec<'e>(executor: impl sqlx::PgExecutor<'e>, text: String) {
    sqlx::raw_sql(sql(text)).execute(executor).await.unwrap();
}

fn sqlstate(code: &str) -> Option<Code> {
    Some(Code::SqlState(SqlState::new(code).unwrap()))
}

/// A table `t` of two rows, `(1, 0)` and `(2, 0)`, and the other session of a deadlock on
/// them. For each request (`go`) the partner takes row 2, says so, then asks for row 1
/// (held by the requester, who then asks for row 2: a cycle). Its deadlock_timeout is long,
/// so the requester (100 ms) is the one Postgres aborts; then it gets row 1 and rolls back,
/// leaving the rows as they were.
struct Rows {
    t: String,
    go: mpsc::Sender<oneshot::Sender<()>>,
    /// One per round the partner played.
    rounds: Counter,
    partner: tokio::task::JoinHandle<()>,
}

impl Rows {
    async fn new(url: &str, pool: &PgPool, prefix: &str) -> Rows {
        let t = txretry_testkit::unique_name(prefix);
        exec(pool, format!("CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL); INSERT INTO {t} VALUES (1, 0), (2, 0)")).await;
        let (go, mut requests) = mpsc::channel::<oneshot::Sender<()>>(1);
        let rounds = Counter::default();
        let partner = tokio::spawn({
            let (url, t, rounds) = (url.to_owned(), t.clone(), rounds.clone());
            async move {
                let mut conn = PgConnection::connect(&url).await.unwrap();
                while let Some(ready) = requests.recv().await {
                    rounds.bump();
                    exec(&mut conn, format!("BEGIN; SET LOCAL deadlock_timeout = '10s'; UPDATE {t} SET v = v + 1 WHERE id = 2")).await;
                    ready.send(()).unwrap();
                    exec(&mut conn, format!("UPDATE {t} SET v = v + 1 WHERE id = 1")).await;
                    exec(&mut conn, "ROLLBACK".to_owned()).await;
                }
            }
        });
        Rows {
            t,
            go,
            rounds,
            partner,
        }
    }

    /// Ends the partner, once `toolbox` (whose tools hold `go`) is gone, and drops the
    /// table.
    async fn remove(self, pool: &PgPool, toolbox: Toolbox) {
        drop((self.go, toolbox));
        self.partner.await.unwrap();
        exec(pool, format!("DROP TABLE {}", self.t)).await;
    }
}

/// Row 1, then (after the partner took row 2) row 2: the deadlock victim.
async fn opposite_order(
    conn: &mut PgConnection,
    t: &str,
    go: Option<&mpsc::Sender<oneshot::Sender<()>>>,
) -> Result<(), sqlx::Error> {
    sqlx::query("SET LOCAL deadlock_timeout = '100ms'")
        .execute(&mut *conn)
        .await?;
    sqlx::query(sql(format!("UPDATE {t} SET v = v + 10 WHERE id = 1")))
        .execute(&mut *conn)
        .await?;
    if let Some(go) = go {
        let (ready, partner_holds_row_2) = oneshot::channel();
        go.send(ready).await.unwrap();
        partner_holds_row_2.await.unwrap();
    }
    sqlx::query(sql(format!("UPDATE {t} SET v = v + 10 WHERE id = 2")))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

async fn values(pool: &PgPool, t: &str) -> Vec<i32> {
    sqlx::query_scalar(sql(format!("SELECT v FROM {t} ORDER BY id")))
        .fetch_all(pool)
        .await
        .unwrap()
}

/// A call of `swap` under a budget of 3, whose handler runs one sqlx transaction (under
/// `ctx.policy()`) that deadlocks for real every attempt; the table is dropped after.
struct Deadlocked {
    failure: ToolFailure,
    events: Events,
    /// The partner's rounds: one per real deadlock.
    rounds: u32,
    runs: u32,
    tx_attempts: u32,
    /// The rows' values after the call.
    values: Vec<i32>,
}

async fn deadlock_every_attempt(test: &str, call_id: &str) -> Option<Deadlocked> {
    let (url, pool) = setup(test).await?;
    let rows = Rows::new(&url, &pool, "tool_deadlock").await;
    let (runs, tx_attempts) = (Counter::default(), Counter::default());
    let shared = (
        pool.clone(),
        rows.t.clone(),
        rows.go.clone(),
        runs.clone(),
        tx_attempts.clone(),
    );
    let tool = shared_tool(
        "swap",
        "",
        shared,
        |ctx, (pool, t, go, runs, tx_attempts)| async move {
            runs.bump();
            txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                tx_attempts.bump();
                opposite_order(tx, &t, Some(&go)).await
            })
            .await?;
            Ok::<_, BoxError>(())
        },
    );
    let events = Events::default();
    let toolbox = events.toolbox(3, tool);

    let failure = failure(call(&toolbox, "swap", call_id).await);

    let values = values(&pool, &rows.t).await;
    let rounds = rows.rounds.get();
    rows.remove(&pool, toolbox).await;
    Some(Deadlocked {
        failure,
        events,
        rounds,
        runs: runs.get(),
        tx_attempts: tx_attempts.get(),
        values,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p2_postgres_deadlock_every_time_runs_the_transaction_exactly_max_attempts_times() {
    let Some(call) = deadlock_every_attempt("tool p2 postgres deadlock", "pg-1").await else {
        return;
    };
    let f = &call.failure;

    assert_eq!(
        call.tx_attempts, 3,
        "3 transaction attempts in all, never 9"
    );
    assert_eq!(call.rounds, 3, "each attempt really deadlocked");
    assert_eq!(call.runs, 1);
    assert_eq!(f.kind(), FailureKind::RetriesExhausted);
    assert_eq!(
        f.attempts()[0].verdict(),
        Verdict::Transient(TransientKind::Deadlock)
    );
    assert_eq!(f.attempts()[0].code(), sqlstate("40P01"));
    let codes: Vec<_> = (call.events.retries().iter())
        .map(|r| (r.attempt, r.code))
        .collect();
    assert_eq!(codes, [(1, sqlstate("40P01")), (2, sqlstate("40P01"))]);
    assert_eq!(call.values, [0, 0], "every attempt rolled back");
}

/// Issue 22, item 4: the runner's three real deadlocks are every attempt of the call. The
/// give-up event and the failure list all three (verdict, phase, code, error), not the one
/// run of the handler, and their number is the message's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_give_up_lists_every_runner_attempt_with_its_verdict_phase_and_error() {
    let test = "tool give-up lists runner attempts";
    let Some(call) = deadlock_every_attempt(test, "pg-giveup").await else {
        return;
    };
    let f = &call.failure;

    assert_eq!(call.rounds, 3, "each attempt really deadlocked");
    let deadlock = Verdict::Transient(TransientKind::Deadlock);
    assert_eq!(f.kind(), FailureKind::RetriesExhausted);
    assert_eq!(f.attempts().len(), 1, "one run of the handler");
    assert_eq!(
        f.to_string(),
        "swap: still failing after 3 attempts (deadlock); nothing was committed, try again later"
    );

    // The failure: every transaction attempt, in order, with its verdict, phase and error.
    let history: Vec<_> = f.history().collect();
    assert_eq!(history.len(), 3, "{history:?}");
    for (i, attempt) in history.iter().enumerate() {
        assert_eq!(attempt.verdict(), deadlock, "attempt {}", i + 1);
        assert_eq!(attempt.kind(), Some(TransientKind::Deadlock));
        assert_eq!(
            attempt.phase(),
            Phase::Body,
            "the victim's UPDATE, before COMMIT"
        );
        assert_eq!(attempt.code(), sqlstate("40P01"));
        assert_eq!(attempt.run(), 1);
        assert!(
            attempt.message().contains("deadlock detected"),
            "{}",
            attempt.message()
        );
    }
    // The runner dropped its earlier attempts' errors (their text is kept); the last one is
    // the error the handler returned.
    assert!(history[0].error().is_none() && history[1].error().is_none());
    let last = history[2].error().expect("the run's error");
    assert_eq!(last.to_string(), f.last_error().to_string());
    assert!(
        last.downcast_ref::<txretry_core::TxError<sqlx::Error>>()
            .is_some(),
        "the runner's TxError, as the handler returned it: {last:?}"
    );
    assert_eq!(f.outcome().attempts(), 3);
    assert_eq!(
        f.outcome().history().to_vec(),
        history.iter().map(|a| a.failure()).collect::<Vec<_>>()
    );

    // The give-up event: the same three, with their errors; its count is theirs.
    let give_ups = call.events.give_ups();
    assert_eq!(give_ups.len(), 1, "{give_ups:?}");
    let give_up = &give_ups[0];
    assert_eq!(give_up.attempts, 3);
    assert!(give_up.outcome_matches, "{give_up:?}");
    assert_eq!(give_up.reason, StopReason::AttemptsExhausted);
    assert_eq!(give_up.listed.len(), 3);
    for (listed, attempt) in give_up.listed.iter().zip(&history) {
        assert_eq!(
            (listed.0, listed.1, listed.2, listed.3.as_str()),
            (deadlock, Phase::Body, sqlstate("40P01"), attempt.message())
        );
    }
    assert_eq!(give_up.error, f.last_error().to_string());
    assert_eq!(call.values, [0, 0], "every attempt rolled back");
}

/// The handler's own transaction (no runner) is the victim once; the invocation runs the
/// handler again, which commits; the change is in the database once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_deadlock_once_in_the_handler_then_success_writes_once() {
    let Some((url, pool)) = setup("tool postgres deadlock once").await else {
        return;
    };
    let rows = Rows::new(&url, &pool, "tool_deadlock_once").await;
    let runs = Counter::default();
    let shared = (pool.clone(), rows.t.clone(), rows.go.clone(), runs.clone());
    let tool = shared_tool("swap", "", shared, |_, (pool, t, go, runs)| async move {
        let run = runs.bump();
        let mut tx = pool.begin().await?;
        opposite_order(&mut tx, &t, (run == 1).then_some(&go)).await?;
        tx.commit().await?;
        Ok::<_, BoxError>(run)
    });
    let events = Events::default();
    let toolbox = events.toolbox(3, tool);

    let out = call(&toolbox, "swap", "pg-2").await.unwrap();

    assert_eq!(out, json!(2));
    assert_eq!((runs.get(), rows.rounds.get()), (2, 1));
    assert_eq!(
        values(&pool, &rows.t).await,
        [10, 10],
        "the change is in the database once"
    );
    let retries = events.retries();
    assert_eq!(retries.len(), 1);
    assert_eq!(
        (retries[0].attempt, retries[0].code),
        (1, sqlstate("40P01"))
    );
    assert_eq!(retries[0].level.as_deref(), Some("toolbox"));
    rows.remove(&pool, toolbox).await;
}

/// Tx1 commits through the runner; tx2 (outside any runner) hits a real lock timeout
/// (55P03): the handler is not run again, tx1 is in the database once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p3_postgres_committed_work_is_not_rerun_after_a_lock_timeout() {
    let Some((url, pool)) = setup("tool p3 postgres").await else {
        return;
    };
    let t = txretry_testkit::unique_name("tool_committed");
    exec(&pool, format!("CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL); INSERT INTO {t} VALUES (1, 0); CREATE TABLE {t}_log (note text NOT NULL)")).await;
    let mut holder = PgConnection::connect(&url).await.unwrap();
    exec(
        &mut holder,
        format!("BEGIN; SELECT * FROM {t} WHERE id = 1 FOR UPDATE"),
    )
    .await;
    let runs = Counter::default();
    let shared = (pool.clone(), t.clone(), runs.clone());
    let tool = shared_tool("ship", "", shared, |ctx, (pool, t, runs)| async move {
        runs.bump();
        let log = t.clone();
        txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
            sqlx::query(sql(format!("INSERT INTO {log}_log VALUES ('tx1')")))
                .execute(&mut **tx)
                .await
                .map(drop)
        })
        .await?;
        let mut tx = pool.begin().await?;
        sqlx::query("SET LOCAL lock_timeout = '50ms'")
            .execute(&mut *tx)
            .await?;
        sqlx::query(sql(format!("UPDATE {t} SET v = v + 1 WHERE id = 1")))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok::<_, BoxError>(())
    });

    let f = failure(call(&toolbox(5, tool), "ship", "pg-3").await);

    assert_eq!(runs.get(), 1);
    assert_eq!(f.kind(), FailureKind::NotRestartable);
    assert_eq!(f.attempts()[0].code(), sqlstate("55P03"));
    assert!(f.committed());
    let logged: i64 = sqlx::query_scalar(sql(format!("SELECT count(*) FROM {t}_log")))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(logged, 1, "tx1 once");
    exec(&mut holder, "ROLLBACK".to_owned()).await;
    exec(&pool, format!("DROP TABLE {t}; DROP TABLE {t}_log")).await;
}

/// A constraint the server checks (23505) is a business outcome: once, with its message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_unique_violation_surfaces_once() {
    let Some((_, pool)) = setup("tool postgres unique").await else {
        return;
    };
    let t = txretry_testkit::unique_name("tool_unique");
    exec(
        &pool,
        format!("CREATE TABLE {t} (id int PRIMARY KEY); INSERT INTO {t} VALUES (1)"),
    )
    .await;
    let tx_attempts = Counter::default();
    let shared = (pool.clone(), t.clone(), tx_attempts.clone());
    let tool = shared_tool(
        "add",
        "",
        shared,
        |ctx, (pool, t, tx_attempts)| async move {
            txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                tx_attempts.bump();
                sqlx::query(sql(format!("INSERT INTO {t} VALUES (1)")))
                    .execute(&mut **tx)
                    .await
                    .map(drop)
            })
            .await?;
            Ok::<_, BoxError>(())
        },
    );

    let f = failure(call(&toolbox(5, tool), "add", "pg-4").await);

    assert_eq!(tx_attempts.get(), 1);
    assert_eq!(f.kind(), FailureKind::Business);
    assert_eq!(f.attempts()[0].code(), sqlstate("23505"));
    assert!(f.to_string().contains("duplicate key value"), "{f}");
    exec(&pool, format!("DROP TABLE {t}")).await;
}

/// An idempotent tool whose COMMIT answer is lost (it landed) is run again, and that run
/// fails another way before its COMMIT: a lock another session holds (`NOWAIT`: 55P03),
/// with no retry left. The call may have taken effect (it did): it is ambiguous, not "still
/// failing, nothing was committed", which only the last attempt's verdict said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_failing_after_an_ambiguous_commit_leaves_the_call_ambiguous() {
    let Some((url, direct)) = setup("tool ambiguous then locked").await else {
        return;
    };
    let t = txretry_testkit::unique_name("tool_ambiguous_locked");
    exec(
        &direct,
        format!("CREATE TABLE {t} (id int PRIMARY KEY); INSERT INTO {t} VALUES (0)"),
    )
    .await;
    let proxy = txretry_testkit::CommitFaultProxy::start(&url).expect("start the proxy");
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(proxy.url())
        .await
        .unwrap();
    let two_attempts = txretry_core::RetryPolicy::builder()
        .max_attempts(2)
        .backoff(txretry_core::Backoff::None)
        .build()
        .unwrap();
    let shared = (pool.clone(), t.clone());
    let tool = shared_tool(
        "add_row",
        "insert a row",
        shared,
        move |ctx, (pool, t)| async move {
            let again = ctx.attempt() > 1;
            txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                if again {
                    // Row 0 is locked by the test's own session by now.
                    sqlx::query(sql(format!(
                        "SELECT id FROM {t} WHERE id = 0 FOR UPDATE NOWAIT"
                    )))
                    .execute(&mut **tx)
                    .await?;
                }
                sqlx::query(sql(format!(
                    "INSERT INTO {t} VALUES (1) ON CONFLICT (id) DO NOTHING"
                )))
                .execute(&mut **tx)
                .await
                .map(drop)
            })
            .await?;
            Ok::<_, BoxError>("inserted")
        },
    )
    .idempotent(true)
    .retry(two_attempts);
    let toolbox = Toolbox::builder().tool(tool).build().unwrap();
    let mut holder = PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(sql(format!(
        "BEGIN; SELECT id FROM {t} WHERE id = 0 FOR UPDATE"
    )))
    .execute(&mut holder)
    .await
    .unwrap();

    proxy.arm_commit_faults(1);
    let failed = failure(call(&toolbox, "add_row", "call-1").await);
    let verdicts: Vec<Verdict> = failed
        .outcome()
        .history()
        .iter()
        .map(|a| a.verdict)
        .collect();
    assert_eq!(
        verdicts,
        [
            Verdict::Ambiguous,
            Verdict::Transient(TransientKind::LockTimeout)
        ],
        "{failed:?}"
    );
    assert_eq!(failed.kind(), FailureKind::Ambiguous, "{failed:?}");
    assert!(failed.outcome().may_have_committed());
    assert!(
        failed.to_string().contains("may or may not have been made"),
        "{failed}"
    );
    let rows: i64 = sqlx::query_scalar(sql(format!("SELECT count(*) FROM {t} WHERE id = 1")))
        .fetch_one(&direct)
        .await
        .unwrap();
    assert_eq!(rows, 1, "the first COMMIT landed");
    drop(holder);
    exec(&direct, format!("DROP TABLE {t}")).await;
}

/// A COMMIT whose answer is lost (the fault proxy lets it land, then answers FATAL 08P01)
/// inside a tool's runner: the outcome is unknown, so a tool that is not idempotent is not
/// run again — even under a policy that retries every kind — and the row exists once. An
/// idempotent tool is run again, and its idempotent write still leaves one row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_commit_in_a_tool_is_rerun_only_for_an_idempotent_tool() {
    let Some((url, direct)) = setup("tool ambiguous commit").await else {
        return;
    };
    let t = txretry_testkit::unique_name("tool_ambiguous");
    exec(&direct, format!("CREATE TABLE {t} (id int PRIMARY KEY)")).await;
    let proxy = txretry_testkit::CommitFaultProxy::start(&url).expect("start the proxy");
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(proxy.url())
        .await
        .unwrap();
    let everything = txretry_core::RetryPolicy::builder()
        .max_attempts(5)
        .backoff(txretry_core::Backoff::Constant(
            std::time::Duration::from_millis(1),
        ))
        .retry_on(txretry_core::KindSet::ALL)
        .build()
        .unwrap();
    let runs = Counter::default();
    let tool = |name: &str, id: i32| -> Tool {
        let shared = (pool.clone(), t.clone(), runs.clone());
        shared_tool(
            name,
            "insert one row",
            shared,
            move |ctx, (pool, t, runs)| async move {
                runs.bump();
                txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
                    sqlx::query(sql(format!(
                        "INSERT INTO {t} VALUES ({id}) ON CONFLICT (id) DO NOTHING"
                    )))
                    .execute(&mut **tx)
                    .await
                    .map(drop)
                })
                .await?;
                Ok::<_, BoxError>("inserted")
            },
        )
        .retry(everything.clone())
    };
    let toolbox = Toolbox::builder()
        .tool(tool("plain", 1))
        .tool(tool("idempotent", 2).idempotent(true))
        .build()
        .unwrap();
    let rows = |id: i32| {
        let (direct, t) = (direct.clone(), t.clone());
        async move {
            sqlx::query_scalar::<_, i64>(sql(format!("SELECT count(*) FROM {t} WHERE id = {id}")))
                .fetch_one(&direct)
                .await
                .unwrap()
        }
    };

    proxy.arm_commit_faults(1);
    let failed = failure(call(&toolbox, "plain", "call-1").await);
    assert_eq!(failed.kind(), FailureKind::Ambiguous, "{failed:?}");
    assert!(failed.outcome().may_have_committed());
    assert_eq!(
        runs.get(),
        1,
        "the handler is not run again after an unknown commit"
    );
    assert_eq!(proxy.faults_injected(), 1);
    assert_eq!(rows(1).await, 1, "the COMMIT landed, once");

    proxy.arm_commit_faults(1);
    let out = call(&toolbox, "idempotent", "call-2")
        .await
        .expect("an idempotent tool is run again after an ambiguous commit");
    assert_eq!(out, json!("inserted"));
    assert_eq!(
        runs.get(),
        3,
        "one more run for the plain tool's call: 1 + 2"
    );
    assert_eq!(proxy.faults_injected(), 2);
    assert_eq!(rows(2).await, 1, "run twice, written once");

    exec(&direct, format!("DROP TABLE {t}")).await;
}
