//! The scenarios every database runs. `once_suite!` expands in a database module that
//! provides:
//!
//! - `struct Fx { pool: sqlx::Pool<DB>, .. }` and `async fn fixture(test: &str) -> Option<Fx>`
//!   (`None`: no server, skip);
//! - `async fn waiting(fx: &Fx, records: &str) -> Option<i64>`: how many sessions wait on a
//!   lock in a statement naming the records' table (`None`: the database cannot say);
//! - `fn age_record(records: &str, key: &str) -> String`: SQL that makes a record two hours
//!   old;
//! - `const UNIQUE_KIND: &str`: the kind recorded for a unique violation;
//! - `const HANDOFF_DEADLOCKS: bool`: whether claims queued behind a claim that rolls back
//!   fail as deadlocks (all but one) before they queue again.
//!
//! The effects table has no key: a second run of the work shows as a second row.

macro_rules! once_suite {
    ($db:ty) => {
        use std::time::Duration;

        use serde_json::json;
        use sqlx::Pool;
        use txretry_core::Verdict;
        use txretry_tool::{
            BoxError, BusinessError, FailureKind, InvokeError, Once, Tool, ToolContext, Toolbox,
        };

        use crate::common::*;

        /// Runs `sql` (one statement) on a connection or a transaction's connection.
        async fn exec(
            conn: &mut <$db as sqlx::Database>::Connection,
            sql: String,
        ) -> Result<u64, sqlx::Error> {
            sqlx::query::<$db>(sqlx::AssertSqlSafe(sql))
                .execute(conn)
                .await
                .map(|done| done.rows_affected())
        }

        async fn run(pool: &Pool<$db>, sql: String) {
            sqlx::query::<$db>(sqlx::AssertSqlSafe(sql))
                .execute(pool)
                .await
                .unwrap();
        }

        async fn count(pool: &Pool<$db>, table: &str) -> i64 {
            sqlx::query_scalar::<$db, i64>(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {table}"
            )))
            .fetch_one(pool)
            .await
            .unwrap()
        }

        /// A record: status, output, error kind, error message.
        async fn record(
            pool: &Pool<$db>,
            records: &str,
            key: &str,
        ) -> (String, Option<String>, Option<String>, Option<String>) {
            sqlx::query_as::<$db, (String, Option<String>, Option<String>, Option<String>)>(
                sqlx::AssertSqlSafe(format!(
                    "SELECT status, output, error_kind, error_message FROM {records} \
                     WHERE call_key = '{key}'"
                )),
            )
            .fetch_one(pool)
            .await
            .unwrap()
        }

        async fn effects_table(pool: &Pool<$db>) -> String {
            let t = unique_name("once_effects");
            run(
                pool,
                format!("CREATE TABLE {t} (item BIGINT NOT NULL, note VARCHAR(100) NOT NULL)"),
            )
            .await;
            t
        }

        async fn drop_tables(pool: &Pool<$db>, tables: &[&str]) {
            for t in tables {
                run(pool, format!("DROP TABLE IF EXISTS {t}")).await;
            }
        }

        /// Sixteen concurrent calls of `tool` with the same call id, once the first one's
        /// work has started and (where the database can say) the other fifteen queue on
        /// its claim of the key.
        async fn sixteen_queued(
            fx: &Fx,
            records: &str,
            toolbox: &Toolbox,
            tool: &'static str,
            args: serde_json::Value,
            runs: &Counter,
        ) -> Vec<tokio::task::JoinHandle<Result<serde_json::Value, InvokeError>>> {
            let calls = (0..16)
                .map(|_| {
                    let (toolbox, args) = (toolbox.clone(), args.clone());
                    tokio::spawn(async move {
                        toolbox.invoke(&anyone(), tool, args, "call-dup").await
                    })
                })
                .collect();
            // The first claim holds the key inside its transaction; the others must queue
            // on the database's lock on it.
            poll_until("the first call's work never started", async || runs.get() >= 1).await;
            if waiting(fx, records).await.is_some() {
                poll_until("the duplicates never queued on the key", async || {
                    waiting(fx, records).await.unwrap_or(0) >= 15
                })
                .await;
            } else {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            calls
        }

        async fn answers(
            calls: Vec<tokio::task::JoinHandle<Result<serde_json::Value, InvokeError>>>,
        ) -> Vec<Result<serde_json::Value, InvokeError>> {
            let mut answers = Vec::new();
            for call in calls {
                answers.push(within(call).await.unwrap());
            }
            answers
        }

        /// `place`: inserts an effect row, waits at `gate`, refuses a negative item (a
        /// business error, after its insert), else answers with the item and the number of
        /// effect rows it sees.
        fn place(pool: &Pool<$db>, t: &str, runs: &Counter, gate: &Gate) -> Tool {
            let (pool, t, runs, gate) = (pool.clone(), t.to_owned(), runs.clone(), gate.clone());
            Tool::new(
                "place",
                "Place an order for an item.",
                move |ctx: ToolContext, args: Args| {
                    let (pool, t, runs, gate) =
                        (pool.clone(), t.clone(), runs.clone(), gate.clone());
                    async move {
                        let placed = ctx
                            .once(&pool, async move |tx| {
                                runs.bump();
                                exec(
                                    &mut **tx,
                                    format!(
                                        "INSERT INTO {t} (item, note) VALUES ({}, 'placed')",
                                        args.item
                                    ),
                                )
                                .await?;
                                gate.pass().await;
                                if args.item < 0 {
                                    return Err(BoxError::from(BusinessError::new(
                                        "unknown_item",
                                        format!("there is no item {}", args.item),
                                    )));
                                }
                                let effects = sqlx::query_scalar::<$db, i64>(
                                    sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {t}")),
                                )
                                .fetch_one(&mut **tx)
                                .await?;
                                Ok(Placed {
                                    item: args.item,
                                    effects,
                                    note: "placed".to_owned(),
                                })
                            })
                            .await?;
                        Ok::<_, BoxError>(placed)
                    }
                },
            )
        }

        fn records_for(records: &str) -> Once {
            Once::new().table(records).unwrap()
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn replaying_a_committed_call_returns_the_same_output_and_the_effect_is_once() {
            let Some(fx) = fixture("once replay").await else {
                return;
            };
            let pool = &fx.pool;
            let t = effects_table(pool).await;
            let records = unique_name("once_calls");
            let runs = Counter::default();
            let toolbox = Toolbox::builder()
                .policy(fast(3))
                .tool(place(pool, &t, &runs, &Gate::open()).once(records_for(&records)))
                .build()
                .unwrap();
            assert!(toolbox.offered(&anyone())[0].is_once());

            let first = toolbox
                .invoke(&anyone(), "place", json!({"item": 7}), "call-1")
                .await
                .unwrap();
            assert_eq!(first, json!({"item": 7, "effects": 1, "note": "placed"}));
            let again = toolbox
                .invoke(&anyone(), "place", json!({"item": 7}), "call-1")
                .await
                .unwrap();
            assert_eq!(again, first, "the recorded output, as the first call returned it");
            assert_eq!(runs.get(), 1, "the work did not run again");
            assert_eq!(count(pool, &t).await, 1, "one effect");
            assert_eq!(count(pool, &records).await, 1);
            let (status, output, kind, message) = record(pool, &records, "call-1").await;
            assert_eq!(status, "ok");
            let output: serde_json::Value = serde_json::from_str(&output.unwrap()).unwrap();
            assert_eq!(output, first);
            assert_eq!((kind, message), (None, None));

            // Another key is another call.
            let other = toolbox
                .invoke(&anyone(), "place", json!({"item": 7}), "call-2")
                .await
                .unwrap();
            assert_eq!(other["effects"], 2);
            assert_eq!(runs.get(), 2);
            assert_eq!(count(pool, &t).await, 2);
            drop_tables(pool, &[&t, &records]).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn sixteen_concurrent_duplicates_give_one_effect_and_sixteen_identical_answers() {
            let Some(fx) = fixture("once concurrent duplicates").await else {
                return;
            };
            let pool = &fx.pool;
            let t = effects_table(pool).await;
            let records = unique_name("once_calls");
            let once = records_for(&records);
            // The table exists before the race: the race is about the key, not the DDL.
            once.migrate(pool).await.unwrap();
            let runs = Counter::default();
            let gate = Gate::closed();
            let toolbox = Toolbox::builder()
                .policy(fast(5))
                .tool(place(pool, &t, &runs, &gate).once(once))
                .build()
                .unwrap();

            let calls =
                sixteen_queued(&fx, &records, &toolbox, "place", json!({"item": 3}), &runs).await;
            assert_eq!(runs.get(), 1, "the duplicates wait; they do not run the work");
            gate.release();
            let answers = answers(calls).await;
            let first = answers[0].as_ref().unwrap().clone();
            assert_eq!(first, json!({"item": 3, "effects": 1, "note": "placed"}));
            for (i, answer) in answers.iter().enumerate() {
                assert_eq!(answer.as_ref().unwrap(), &first, "answer {i}");
            }
            assert_eq!(runs.get(), 1, "the work ran once");
            assert_eq!(count(pool, &t).await, 1, "one effect");
            assert_eq!(count(pool, &records).await, 1);
            drop_tables(pool, &[&t, &records]).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn a_claim_rolled_back_under_queued_duplicates_hands_the_key_to_one_of_them() {
            let Some(fx) = fixture("once rolled back under duplicates").await else {
                return;
            };
            let pool = &fx.pool;
            let t = effects_table(pool).await;
            let records = unique_name("once_calls");
            let once = records_for(&records);
            once.migrate(pool).await.unwrap();
            let runs = Counter::default();
            let gate = Gate::closed();
            let tool = {
                let (pool, t, runs, gate) = (pool.clone(), t.clone(), runs.clone(), gate.clone());
                Tool::new("flaky", "", move |ctx: ToolContext, args: Args| {
                    let (pool, t, runs, gate) =
                        (pool.clone(), t.clone(), runs.clone(), gate.clone());
                    async move {
                        ctx.once(&pool, async move |tx| {
                            let run = runs.bump();
                            exec(&mut **tx, format!("INSERT INTO {t} VALUES ({}, 'x')", args.item))
                                .await?;
                            if run == 1 {
                                // The duplicates queue behind this claim; then it rolls back.
                                // On MariaDB, the row's rollback leaves the duplicates' locks
                                // on the gap, and InnoDB ends all but one of their claims as
                                // deadlocks (1213): retried, they queue behind the new claim.
                                gate.pass().await;
                                return Err(BoxError::from(std::io::Error::other(
                                    "deadlock detected",
                                )));
                            }
                            Ok(run)
                        })
                        .await
                    }
                })
                .once(once)
            };
            let retries = Counter::default();
            let toolbox = Toolbox::builder()
                .policy(fast_counting(10, &retries))
                .tool(tool)
                .build()
                .unwrap();
            let calls =
                sixteen_queued(&fx, &records, &toolbox, "flaky", json!({"item": 5}), &runs).await;
            gate.release();
            let answers = answers(calls).await;
            for (i, answer) in answers.iter().enumerate() {
                assert_eq!(answer.as_ref().unwrap(), &json!(2), "answer {i}");
            }
            assert_eq!(runs.get(), 2, "the rolled-back run, then one more");
            if HANDOFF_DEADLOCKS {
                // The first call's retry, and at least one duplicate's after a deadlock.
                assert!(retries.get() > 1, "retries: {}", retries.get());
            } else {
                assert_eq!(retries.get(), 1, "only the first call's retry");
            }
            assert_eq!(count(pool, &t).await, 1, "one effect");
            assert_eq!(count(pool, &records).await, 1);
            drop_tables(pool, &[&t, &records]).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_business_error_is_recorded_its_writes_rolled_back_and_replayed() {
            let Some(fx) = fixture("once business error").await else {
                return;
            };
            let pool = &fx.pool;
            let t = effects_table(pool).await;
            let records = unique_name("once_calls");
            let runs = Counter::default();
            let toolbox = Toolbox::builder()
                .policy(fast(3))
                .tool(place(pool, &t, &runs, &Gate::open()).once(records_for(&records)))
                .build()
                .unwrap();

            let first = toolbox
                .invoke(&anyone(), "place", json!({"item": -5}), "call-b")
                .await;
            let Err(InvokeError::Failed(failure)) = &first else {
                panic!("{first:?}");
            };
            assert_eq!(failure.kind(), FailureKind::Business);
            assert_eq!(failure.to_string(), "place: there is no item -5");
            assert_eq!(failure.attempts().len(), 1);
            assert_eq!(failure.attempts()[0].verdict(), Verdict::Permanent);

            let again = toolbox
                .invoke(&anyone(), "place", json!({"item": -5}), "call-b")
                .await;
            assert_eq!(answer(&again), answer(&first), "the same business error");
            assert_eq!(runs.get(), 1, "the work did not run again");
            assert_eq!(count(pool, &t).await, 0, "the work's insert was rolled back");
            let (status, output, kind, message) = record(pool, &records, "call-b").await;
            assert_eq!(status, "error");
            assert_eq!(output, None);
            assert_eq!(kind.as_deref(), Some("unknown_item"));
            assert_eq!(message.as_deref(), Some("there is no item -5"));
            drop_tables(pool, &[&t, &records]).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_permanent_database_error_is_recorded_with_its_code() {
            let Some(fx) = fixture("once constraint").await else {
                return;
            };
            let pool = &fx.pool;
            let t = effects_table(pool).await;
            let keyed = unique_name("once_keyed");
            run(pool, format!("CREATE TABLE {keyed} (id INT PRIMARY KEY)")).await;
            let records = unique_name("once_calls");
            let runs = Counter::default();
            let tool = {
                let (pool, t, keyed, runs) =
                    (pool.clone(), t.clone(), keyed.clone(), runs.clone());
                Tool::new("register", "", move |ctx: ToolContext, _: Args| {
                    let (pool, t, keyed, runs) =
                        (pool.clone(), t.clone(), keyed.clone(), runs.clone());
                    async move {
                        ctx.once(&pool, async move |tx| {
                            runs.bump();
                            exec(&mut **tx, format!("INSERT INTO {t} VALUES (1, 'x')")).await?;
                            exec(&mut **tx, format!("INSERT INTO {keyed} VALUES (1), (1)"))
                                .await?;
                            Ok::<_, sqlx::Error>(())
                        })
                        .await
                    }
                })
                .once(records_for(&records))
            };
            let toolbox = Toolbox::builder().policy(fast(3)).tool(tool).build().unwrap();

            let first = toolbox
                .invoke(&anyone(), "register", json!({"item": 1}), "call-u")
                .await;
            assert_eq!(first.as_ref().unwrap_err().failure().unwrap().kind(), FailureKind::Business);
            let again = toolbox
                .invoke(&anyone(), "register", json!({"item": 1}), "call-u")
                .await;
            assert_eq!(answer(&again), answer(&first));
            assert_eq!(runs.get(), 1);
            assert_eq!(count(pool, &t).await, 0, "rolled back to the savepoint");
            assert_eq!(count(pool, &keyed).await, 0);
            let (status, _, kind, message) = record(pool, &records, "call-u").await;
            assert_eq!(status, "error");
            assert_eq!(kind.as_deref(), Some(UNIQUE_KIND));
            assert_eq!(
                format!("register: {}", message.unwrap()),
                first.unwrap_err().to_string()
            );
            drop_tables(pool, &[&t, &keyed, &records]).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_transient_failure_in_the_work_is_retried_and_never_recorded() {
            let Some(fx) = fixture("once transient").await else {
                return;
            };
            let pool = &fx.pool;
            let t = effects_table(pool).await;
            let records = unique_name("once_calls");
            let runs = Counter::default();
            let tool = {
                let (pool, t, runs) = (pool.clone(), t.clone(), runs.clone());
                Tool::new("flaky", "", move |ctx: ToolContext, args: Args| {
                    let (pool, t, runs) = (pool.clone(), t.clone(), runs.clone());
                    async move {
                        ctx.once(&pool, async move |tx| {
                            let run = runs.bump();
                            exec(&mut **tx, format!("INSERT INTO {t} VALUES ({}, 'x')", args.item))
                                .await?;
                            if run == 1 {
                                // A driver's own deadlock phrase: transient.
                                return Err(BoxError::from(std::io::Error::other(
                                    "deadlock detected",
                                )));
                            }
                            Ok(run)
                        })
                        .await
                    }
                })
                .once(records_for(&records))
            };
            let toolbox = Toolbox::builder().policy(fast(3)).tool(tool).build().unwrap();
            let out = toolbox
                .invoke(&anyone(), "flaky", json!({"item": 4}), "call-t")
                .await
                .unwrap();
            assert_eq!(out, json!(2), "the second run's output");
            assert_eq!(count(pool, &t).await, 1, "the first run was rolled back, claim and all");
            let (status, output, _, _) = record(pool, &records, "call-t").await;
            assert_eq!((status.as_str(), output.as_deref()), ("ok", Some("2")));
            let again = toolbox
                .invoke(&anyone(), "flaky", json!({"item": 4}), "call-t")
                .await
                .unwrap();
            assert_eq!(again, out);
            assert_eq!(runs.get(), 2);
            drop_tables(pool, &[&t, &records]).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_key_from_the_arguments_makes_two_call_ids_one_call() {
            let Some(fx) = fixture("once key from args").await else {
                return;
            };
            let pool = &fx.pool;
            let t = effects_table(pool).await;
            let records = unique_name("once_calls");
            let runs = Counter::default();
            let once = Once::key_from_args(|args: &Args| format!("item-{}", args.item))
                .table(&records)
                .unwrap();
            let toolbox = Toolbox::builder()
                .policy(fast(3))
                .tool(place(pool, &t, &runs, &Gate::open()).once(once))
                .build()
                .unwrap();
            let a = toolbox
                .invoke(&anyone(), "place", json!({"item": 9}), "call-a")
                .await
                .unwrap();
            let b = toolbox
                .invoke(&anyone(), "place", json!({"item": 9}), "call-b")
                .await
                .unwrap();
            assert_eq!(a, b);
            assert_eq!(runs.get(), 1);
            let c = toolbox
                .invoke(&anyone(), "place", json!({"item": 10}), "call-a")
                .await
                .unwrap();
            assert_eq!(c["effects"], 2);
            assert_eq!(record(pool, &records, "item-9").await.0, "ok");
            assert_eq!(count(pool, &records).await, 2);
            drop_tables(pool, &[&t, &records]).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn the_table_is_created_on_first_use_migrate_is_idempotent_and_prune_expires() {
            let Some(fx) = fixture("once migrate prune").await else {
                return;
            };
            let pool = &fx.pool;
            let t = effects_table(pool).await;
            let records = unique_name("once_calls");
            let once = records_for(&records);
            let runs = Counter::default();
            let toolbox = Toolbox::builder()
                .policy(fast(3))
                .tool(place(pool, &t, &runs, &Gate::open()).once(once.clone()))
                .build()
                .unwrap();
            // No table yet: the first call creates it.
            for (key, item) in [("call-1", 1), ("call-2", 2)] {
                toolbox
                    .invoke(&anyone(), "place", json!({ "item": item }), key)
                    .await
                    .unwrap();
            }
            assert_eq!(count(pool, &records).await, 2);
            once.migrate(pool).await.unwrap();
            once.migrate(pool).await.unwrap();
            assert_eq!(count(pool, &records).await, 2, "migrate keeps the records");

            assert_eq!(once.prune(pool, Duration::from_secs(3600)).await.unwrap(), 0);
            run(pool, age_record(&records, "call-1")).await;
            assert_eq!(once.prune(pool, Duration::from_secs(3600)).await.unwrap(), 1);
            assert_eq!(count(pool, &records).await, 1);
            // A pruned key is forgotten: the call runs again.
            toolbox
                .invoke(&anyone(), "place", json!({"item": 1}), "call-1")
                .await
                .unwrap();
            assert_eq!(runs.get(), 3);
            toolbox
                .invoke(&anyone(), "place", json!({"item": 2}), "call-2")
                .await
                .unwrap();
            assert_eq!(runs.get(), 3, "call-2 was kept");
            drop_tables(pool, &[&t, &records]).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_timed_out_attempt_is_run_again_because_the_record_decides() {
            let Some(fx) = fixture("once timeout").await else {
                return;
            };
            let pool = &fx.pool;
            let t = effects_table(pool).await;
            let records = unique_name("once_calls");
            let runs = Counter::default();
            let tool = {
                let (pool, t, runs) = (pool.clone(), t.clone(), runs.clone());
                Tool::new("slow", "", move |ctx: ToolContext, args: Args| {
                    let (pool, t, runs) = (pool.clone(), t.clone(), runs.clone());
                    async move {
                        ctx.once(&pool, async move |tx| {
                            let run = runs.bump();
                            exec(&mut **tx, format!("INSERT INTO {t} VALUES ({}, 'x')", args.item))
                                .await?;
                            if run == 1 {
                                // Never finishes: the attempt times out and is dropped.
                                std::future::pending::<()>().await;
                            }
                            Ok::<_, BoxError>(run)
                        })
                        .await
                    }
                })
                // Not idempotent: `once` alone makes the timed-out attempt safe to rerun.
                .timeout(Duration::from_millis(300))
                .once(records_for(&records))
            };
            let toolbox = Toolbox::builder().policy(fast(4)).tool(tool).build().unwrap();
            let out = within(toolbox.invoke(&anyone(), "slow", json!({"item": 1}), "call-s"))
                .await
                .unwrap();
            assert_eq!(out, json!(2));
            assert_eq!(runs.get(), 2);
            assert_eq!(count(pool, &t).await, 1, "the timed-out run was rolled back");
            drop_tables(pool, &[&t, &records]).await;
        }
    };
}

/// The commit-fault proxy scenario, for the server databases: `$options` is the database's
/// pool options type.
macro_rules! proxy_suite {
    ($db:ty, $options:ty) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_commit_answered_with_a_connection_error_is_retried_and_finds_the_record() {
            let Some(fx) = fixture("once commit fault proxy").await else {
                return;
            };
            let pool = &fx.pool;
            let t = effects_table(pool).await;
            let records = unique_name("once_calls");
            let once = records_for(&records);
            once.migrate(pool).await.unwrap();
            let proxy = txretry_testkit::CommitFaultProxy::start(&fx.url).unwrap();
            let via = <$options>::new()
                .max_connections(2)
                .connect(proxy.url())
                .await
                .unwrap();
            let runs = Counter::default();
            let retried = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let toolbox = {
                let retried = std::sync::Arc::clone(&retried);
                Toolbox::builder()
                    .policy(fast(3))
                    .on_retry(move |e| {
                        retried
                            .lock()
                            .unwrap()
                            .push((e.verdict, e.phase, e.attempt));
                    })
                    .tool(place(&via, &t, &runs, &Gate::open()).once(once))
                    .build()
                    .unwrap()
            };

            proxy.arm_commit_faults(1);
            let first = within(toolbox.invoke(&anyone(), "place", json!({"item": 5}), "call-p"))
                .await
                .unwrap();
            assert_eq!(proxy.faults_injected(), 1, "the COMMIT landed, its answer was lost");
            assert_eq!(first, json!({"item": 5, "effects": 1, "note": "placed"}));
            assert_eq!(
                runs.get(),
                1,
                "the retry found the record: the work did not run again"
            );
            assert_eq!(
                *retried.lock().unwrap(),
                [(Verdict::Ambiguous, txretry_core::Phase::Commit, 1)],
                "one retry, of the ambiguous COMMIT"
            );
            assert_eq!(count(pool, &t).await, 1, "one effect");

            let again = toolbox
                .invoke(&anyone(), "place", json!({"item": 5}), "call-p")
                .await
                .unwrap();
            assert_eq!(again, first);
            assert_eq!(runs.get(), 1);
            assert_eq!(count(pool, &t).await, 1);
            assert_eq!(count(pool, &records).await, 1);
            drop_tables(pool, &[&t, &records]).await;
        }
    };
}
