//! The `once` matrix: every scenario, written once, generic over [`OnceDriver`], and run on
//! every (driver, database) pair by `once_scenarios!` (and, for the server databases,
//! `commit_fault_scenarios!`), expanded in each driver's module under `drivers/`.
//!
//! A lost COMMIT answer needs a network between the client and the database: on SQLite
//! there is none (COMMIT is a function call that always returns its result code), so the
//! SQLite pairs run what replaces it instead: the process dying before COMMIT (nothing
//! recorded: the re-sent call runs the work) and after COMMIT, before it answers (the
//! re-sent call gets the record). Those two run on every pair.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use txretry_core::{Phase, Verdict};
use txretry_tool::{FailureKind, InvokeError, Once, Tool, ToolFailure, Toolbox};

use crate::common::*;
use crate::driver::{OnceDriver, Record};

/// One test per scenario for `$driver`.
macro_rules! once_scenarios {
    ($driver:ty) => {
        crate::scenarios::once_scenarios!(@each $driver, 4;
            replaying_a_committed_call_returns_the_same_output_and_the_effect_is_once,
            sixteen_concurrent_duplicates_give_one_effect_and_sixteen_identical_answers,
            duplicates_queued_behind_a_claim_that_rolls_back_get_one_effect,
            a_business_error_is_recorded_its_writes_rolled_back_and_replayed,
            a_permanent_database_error_is_recorded_with_its_code,
            a_transient_failure_in_the_work_is_retried_and_never_recorded,
            a_key_from_the_arguments_makes_two_call_ids_one_call,
            the_table_is_created_on_first_use_migrate_is_idempotent_and_prune_expires,
            a_table_created_from_the_ddl_is_the_one_calls_use,
            a_timed_out_attempt_is_run_again_because_the_record_decides,
            an_unconfirmed_call_says_a_repeat_with_the_same_key_is_safe,
            a_process_dying_before_commit_leaves_nothing_and_the_resent_call_runs,
            a_process_dying_after_commit_leaves_the_record_the_resent_call_gets,
        );
    };
    (@each $driver:ty, $threads:literal; $($scenario:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = $threads)]
            async fn $scenario() {
                crate::scenarios::Setup::<$driver>::run(
                    stringify!($scenario),
                    crate::scenarios::$scenario::<$driver>,
                )
                .await;
            }
        )*
    };
}

/// The scenarios that need a network between client and server (Postgres, MariaDB).
macro_rules! commit_fault_scenarios {
    ($driver:ty) => {
        crate::scenarios::once_scenarios!(@each $driver, 2;
            a_lost_commit_answer_is_resolved_by_the_resent_call,
        );
    };
}

pub(crate) use {commit_fault_scenarios, once_scenarios};

type Answer = Result<Value, InvokeError>;

/// What every scenario starts from: the fixture, an effects table of its own, and a
/// name of its own for the records' table (created by the scenario or its first call).
pub struct Setup<D> {
    pub fx: D,
    pub t: String,
    pub records: String,
}

impl<D: OnceDriver> Setup<D> {
    /// `None`: no server (skip).
    pub async fn new(test: &str) -> Option<Setup<D>> {
        let fx = D::open(test).await?;
        let t = unique_name("once_effects");
        fx.exec(format!(
            "CREATE TABLE {t} (item BIGINT NOT NULL, note VARCHAR(100) NOT NULL)"
        ))
        .await;
        let records = unique_name("once_calls");
        Some(Setup { fx, t, records })
    }

    /// Runs `scenario` on a setup of its own (nothing, with no server), then drops its
    /// tables; a failed scenario leaves them, to be looked at.
    pub async fn run(test: &str, scenario: impl AsyncFnOnce(&Setup<D>)) {
        let Some(setup) = Setup::new(test).await else {
            return;
        };
        scenario(&setup).await;
        drop_tables(&setup.fx, &[&setup.t, &setup.records]).await;
    }

    /// `once` with the records' table.
    pub fn once(&self) -> Once {
        Once::new().table(&self.records).unwrap()
    }

    /// Creates the records' table (before the calls, where the scenario is not about that).
    pub async fn migrate(&self) {
        self.fx.migrate(&self.once()).await;
    }

    /// The test tool `name` doing `work`, declared `once` with the records' table.
    pub fn tool(&self, name: &'static str, work: &Work) -> Tool {
        D::tool(&self.fx.handle(), name, work).once(self.once())
    }

    pub async fn effects(&self) -> i64 {
        count(&self.fx, &self.t).await
    }

    pub async fn recorded(&self) -> i64 {
        count(&self.fx, &self.records).await
    }

    pub async fn record(&self, key: &str) -> Record {
        self.fx.record(&self.records, key).await
    }
}

/// The retries a toolbox's `on_retry` hook saw: verdict, phase, attempt.
pub type Retried = Arc<Mutex<Vec<(Verdict, Phase, u32)>>>;

/// A toolbox of `tool` (3 attempts) whose retries are listed in [`Retried`].
pub fn recording(tool: Tool) -> (Toolbox, Retried) {
    let retried = Arc::new(Mutex::new(Vec::new()));
    let toolbox = {
        let retried = Arc::clone(&retried);
        Toolbox::builder()
            .policy(fast(3))
            .on_retry(move |e| {
                retried
                    .lock()
                    .unwrap()
                    .push((e.verdict, e.phase, e.attempt))
            })
            .tool(tool)
            .build()
            .unwrap()
    };
    (toolbox, retried)
}

async fn count<D: OnceDriver>(fx: &D, table: &str) -> i64 {
    fx.scalar(format!("SELECT count(*) FROM {table}")).await
}

async fn drop_tables<D: OnceDriver>(fx: &D, tables: &[&str]) {
    for t in tables {
        fx.exec(format!("DROP TABLE IF EXISTS {t}")).await;
    }
}

fn toolbox(policy_attempts: u32, tool: Tool) -> Toolbox {
    Toolbox::builder()
        .policy(fast(policy_attempts))
        .tool(tool)
        .build()
        .unwrap()
}

/// The failure of a call that must have failed.
fn failed(result: &Answer) -> &ToolFailure {
    let Err(InvokeError::Failed(failure)) = result else {
        panic!("{result:?}");
    };
    failure
}

/// Sixteen concurrent calls of `tool` with `item` and the same call id, once the first
/// one's work has started and (where the database can say) the other fifteen queue on its
/// claim of the key.
async fn sixteen_queued<D: OnceDriver>(
    s: &Setup<D>,
    toolbox: &Toolbox,
    tool: &'static str,
    item: i64,
    runs: &Counter,
) -> Vec<tokio::task::JoinHandle<Answer>> {
    let calls = (0..16)
        .map(|_| {
            let toolbox = toolbox.clone();
            tokio::spawn(async move { call(&toolbox, tool, item, "call-dup").await })
        })
        .collect();
    // The first claim holds the key inside its transaction; the others must queue on the
    // database's lock on it.
    poll_until("the first call's work never started", async || {
        runs.get() >= 1
    })
    .await;
    match D::DB.waiting_sql(&s.records) {
        Some(sql) => {
            poll_until("the duplicates never queued on the key", async || {
                s.fx.scalar(sql.clone()).await >= 15
            })
            .await
        }
        // SQLite: the duplicates wait in the busy handler, which nothing reports.
        None => tokio::time::sleep(Duration::from_millis(200)).await,
    }
    calls
}

async fn answers(calls: Vec<tokio::task::JoinHandle<Answer>>) -> Vec<Answer> {
    let mut answers = Vec::new();
    for call in calls {
        answers.push(within(call).await.unwrap());
    }
    answers
}

pub async fn replaying_a_committed_call_returns_the_same_output_and_the_effect_is_once<
    D: OnceDriver,
>(
    s: &Setup<D>,
) {
    let work = Work::new(&s.t, Step::Place);
    let toolbox = toolbox(3, s.tool("place", &work));
    assert!(toolbox.offered(&anyone())[0].is_once());

    let first = call(&toolbox, "place", 7, "call-1").await.unwrap();
    assert_eq!(first, placed(7, 1));
    let again = call(&toolbox, "place", 7, "call-1").await.unwrap();
    assert_eq!(
        again, first,
        "the recorded output, as the first call returned it"
    );
    assert_eq!(work.runs.get(), 1, "the work did not run again");
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.recorded().await, 1);
    let (status, output, kind, message) = s.record("call-1").await;
    assert_eq!(status, "ok");
    let output: Value = serde_json::from_str(&output.unwrap()).unwrap();
    assert_eq!(output, first);
    assert_eq!((kind, message), (None, None));

    // Another key is another call.
    let other = call(&toolbox, "place", 7, "call-2").await.unwrap();
    assert_eq!(other["effects"], 2);
    assert_eq!(work.runs.get(), 2);
    assert_eq!(s.effects().await, 2);
}

pub async fn sixteen_concurrent_duplicates_give_one_effect_and_sixteen_identical_answers<
    D: OnceDriver,
>(
    s: &Setup<D>,
) {
    // The table exists before the race: the race is about the key, not the DDL.
    s.migrate().await;
    let gate = Gate::closed();
    let work = Work::new(&s.t, Step::Place).gated(&gate);
    let toolbox = toolbox(5, s.tool("place", &work));

    let calls = sixteen_queued(s, &toolbox, "place", 3, &work.runs).await;
    assert_eq!(
        work.runs.get(),
        1,
        "the duplicates wait; they do not run the work"
    );
    gate.release();
    let answers = answers(calls).await;
    let first = answers[0].as_ref().unwrap().clone();
    assert_eq!(first, placed(3, 1));
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(answer.as_ref().unwrap(), &first, "answer {i}");
    }
    assert_eq!(work.runs.get(), 1, "the work ran once");
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.recorded().await, 1);
}

pub async fn duplicates_queued_behind_a_claim_that_rolls_back_get_one_effect<D: OnceDriver>(
    s: &Setup<D>,
) {
    s.migrate().await;
    let gate = Gate::closed();
    // The duplicates queue behind the first claim; then it rolls back. On MariaDB, the
    // row's rollback leaves the duplicates' locks on the gap, and InnoDB ends all but one
    // of their claims as deadlocks (1213): retried, they queue behind the new claim.
    let work = Work::new(&s.t, Step::FlakyFirst).gated(&gate);
    let retries = Counter::default();
    let toolbox = Toolbox::builder()
        .policy(fast_counting(10, &retries))
        .tool(s.tool("flaky", &work))
        .build()
        .unwrap();
    let calls = sixteen_queued(s, &toolbox, "flaky", 5, &work.runs).await;
    gate.release();
    let answers = answers(calls).await;
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(answer.as_ref().unwrap(), &placed(5, 1), "answer {i}");
    }
    assert_eq!(work.runs.get(), 2, "the rolled-back run, then one more");
    if D::DB.handoff_deadlocks() {
        // The first call's retry, and at least one duplicate's after a deadlock.
        assert!(retries.get() > 1, "retries: {}", retries.get());
    } else {
        assert_eq!(retries.get(), 1, "only the first call's retry");
    }
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.recorded().await, 1);
}

pub async fn a_business_error_is_recorded_its_writes_rolled_back_and_replayed<D: OnceDriver>(
    s: &Setup<D>,
) {
    let work = Work::new(&s.t, Step::Place);
    let toolbox = toolbox(3, s.tool("place", &work));

    let first = call(&toolbox, "place", -5, "call-b").await;
    let failure = failed(&first);
    assert_eq!(failure.kind(), FailureKind::Business);
    assert_eq!(failure.to_string(), "place: there is no item -5");
    assert_eq!(failure.attempts().len(), 1);
    assert_eq!(failure.attempts()[0].verdict(), Verdict::Permanent);

    let again = call(&toolbox, "place", -5, "call-b").await;
    assert_eq!(answer(&again), answer(&first), "the same business error");
    assert_eq!(work.runs.get(), 1, "the work did not run again");
    assert_eq!(s.effects().await, 0, "the work's insert was rolled back");
    let (status, output, kind, message) = s.record("call-b").await;
    assert_eq!(status, "error");
    assert_eq!(output, None);
    assert_eq!(kind.as_deref(), Some("unknown_item"));
    assert_eq!(message.as_deref(), Some("there is no item -5"));
}

pub async fn a_permanent_database_error_is_recorded_with_its_code<D: OnceDriver>(s: &Setup<D>) {
    let keyed = unique_name("once_keyed");
    s.fx.exec(format!("CREATE TABLE {keyed} (id INT PRIMARY KEY)"))
        .await;
    let work = Work::new(&s.t, Step::Duplicate(keyed.clone()));
    let toolbox = toolbox(3, s.tool("register", &work));

    let first = call(&toolbox, "register", 1, "call-u").await;
    let failure = first.as_ref().unwrap_err().failure().unwrap();
    assert_eq!(failure.kind(), FailureKind::Business);
    let again = call(&toolbox, "register", 1, "call-u").await;
    assert_eq!(answer(&again), answer(&first));
    assert_eq!(work.runs.get(), 1);
    assert_eq!(s.effects().await, 0, "rolled back to the savepoint");
    assert_eq!(count(&s.fx, &keyed).await, 0);
    let (status, _, kind, message) = s.record("call-u").await;
    assert_eq!(status, "error");
    assert_eq!(kind.as_deref(), Some(D::DB.unique_kind()));
    assert_eq!(
        format!("register: {}", message.unwrap()),
        first.unwrap_err().to_string()
    );
    drop_tables(&s.fx, &[&keyed]).await;
}

pub async fn a_transient_failure_in_the_work_is_retried_and_never_recorded<D: OnceDriver>(
    s: &Setup<D>,
) {
    let work = Work::new(&s.t, Step::FlakyFirst);
    let toolbox = toolbox(3, s.tool("flaky", &work));
    let out = call(&toolbox, "flaky", 4, "call-t").await.unwrap();
    assert_eq!(
        out,
        placed(4, 1),
        "the second run's output: the first run was rolled back, claim and all"
    );
    assert_eq!(work.runs.get(), 2);
    assert_eq!(s.effects().await, 1);
    let (status, output, _, _) = s.record("call-t").await;
    assert_eq!(status, "ok");
    assert_eq!(
        serde_json::from_str::<Value>(&output.unwrap()).unwrap(),
        out
    );
    let again = call(&toolbox, "flaky", 4, "call-t").await.unwrap();
    assert_eq!(again, out);
    assert_eq!(work.runs.get(), 2);
}

pub async fn a_key_from_the_arguments_makes_two_call_ids_one_call<D: OnceDriver>(s: &Setup<D>) {
    let once = Once::key_from_args(|args: &Args| format!("item-{}", args.item))
        .table(&s.records)
        .unwrap();
    let work = Work::new(&s.t, Step::Place);
    let toolbox = toolbox(3, D::tool(&s.fx.handle(), "place", &work).once(once));
    let a = call(&toolbox, "place", 9, "call-a").await.unwrap();
    let b = call(&toolbox, "place", 9, "call-b").await.unwrap();
    assert_eq!(a, b);
    assert_eq!(work.runs.get(), 1);
    let c = call(&toolbox, "place", 10, "call-a").await.unwrap();
    assert_eq!(c["effects"], 2);
    assert_eq!(s.record("item-9").await.0, "ok");
    assert_eq!(s.recorded().await, 2);
}

pub async fn the_table_is_created_on_first_use_migrate_is_idempotent_and_prune_expires<
    D: OnceDriver,
>(
    s: &Setup<D>,
) {
    let once = s.once();
    let work = Work::new(&s.t, Step::Place);
    let toolbox = toolbox(3, s.tool("place", &work));
    // No table yet: the first call creates it; its failed claim is not one of its attempts.
    let first = call(&toolbox, "place", 1, "call-1").await.unwrap();
    assert_eq!(first, placed(1, 1));
    call(&toolbox, "place", 2, "call-2").await.unwrap();
    assert_eq!(s.recorded().await, 2);
    s.migrate().await;
    s.migrate().await;
    assert_eq!(s.recorded().await, 2, "migrate keeps the records");

    let hour = Duration::from_secs(3600);
    assert_eq!(s.fx.prune(&once, hour).await, 0);
    s.fx.exec(D::DB.age_sql(&s.records, "call-1")).await;
    assert_eq!(s.fx.prune(&once, hour).await, 1);
    assert_eq!(s.recorded().await, 1);
    // A pruned key is forgotten: the call runs again; the kept one does not.
    call(&toolbox, "place", 1, "call-1").await.unwrap();
    assert_eq!(work.runs.get(), 3);
    call(&toolbox, "place", 2, "call-2").await.unwrap();
    assert_eq!(work.runs.get(), 3, "call-2 was kept");
}

/// Users who run their own migrations create the table from `Once::ddl`: the calls use it
/// as it is, and `migrate` finds nothing to do.
pub async fn a_table_created_from_the_ddl_is_the_one_calls_use<D: OnceDriver>(s: &Setup<D>) {
    s.fx.exec(s.once().ddl(D::DB.dialect())).await;
    assert_eq!(s.recorded().await, 0);
    let work = Work::new(&s.t, Step::Place);
    let toolbox = toolbox(3, s.tool("place", &work));
    let first = call(&toolbox, "place", 8, "call-d").await.unwrap();
    let again = call(&toolbox, "place", 8, "call-d").await.unwrap();
    assert_eq!(again, first);
    assert_eq!(work.runs.get(), 1);
    s.migrate().await;
    assert_eq!(s.record("call-d").await.0, "ok");
    assert_eq!(s.recorded().await, 1);
}

pub async fn a_timed_out_attempt_is_run_again_because_the_record_decides<D: OnceDriver>(
    s: &Setup<D>,
) {
    let work = Work::new(&s.t, Step::HangFirst);
    // Not idempotent: `once` alone makes the timed-out attempt safe to rerun.
    let tool = s.tool("slow", &work).timeout(Duration::from_millis(300));
    let out = call(&toolbox(4, tool), "slow", 1, "call-s").await.unwrap();
    assert_eq!(out, placed(1, 1));
    assert_eq!(work.runs.get(), 2);
    assert_eq!(s.effects().await, 1, "the timed-out run was rolled back");
}

/// A `once` call that could not be confirmed says that repeating it with the same key is
/// safe, instead of "check before trying again".
pub async fn an_unconfirmed_call_says_a_repeat_with_the_same_key_is_safe<D: OnceDriver>(
    s: &Setup<D>,
) {
    let work = Work::new(&s.t, Step::HangAlways);
    let tool = s.tool("stuck", &work).timeout(Duration::from_millis(100));
    let result = call(&toolbox(2, tool), "stuck", 1, "call-x").await;
    let failure = failed(&result);
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
    assert_eq!(s.effects().await, 0, "nothing committed");
}

/// The `place` tool doing `step`'s work on a records' table made beforehand, after its
/// call of `item` under `key` died (the handler panicked) and failed saying so.
async fn died<D: OnceDriver>(s: &Setup<D>, step: Step, item: i64, key: &str) -> (Work, Toolbox) {
    s.migrate().await;
    let work = Work::new(&s.t, step);
    let toolbox = toolbox(3, s.tool("place", &work));
    let result = call(&toolbox, "place", item, key).await;
    assert_eq!(failed(&result).kind(), FailureKind::Panicked);
    (work, toolbox)
}

/// The work dies (panics) inside its transaction, as a process dying before COMMIT: the
/// transaction is rolled back, nothing is recorded, and the call re-sent with the same key
/// runs the work: one effect.
pub async fn a_process_dying_before_commit_leaves_nothing_and_the_resent_call_runs<
    D: OnceDriver,
>(
    s: &Setup<D>,
) {
    let (work, toolbox) = died(s, Step::DieBeforeCommitFirst, 6, "call-d").await;
    assert_eq!(
        s.recorded().await,
        0,
        "no record: the claim was rolled back"
    );
    let resent = call(&toolbox, "place", 6, "call-d").await.unwrap();
    assert_eq!(resent, placed(6, 1));
    assert_eq!(work.runs.get(), 2);
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.record("call-d").await.0, "ok");
}

/// The handler dies (panics) after its `once` call committed, before it answers: the
/// caller never got the answer, as after a process dying then, or an answer lost on the
/// way. The call re-sent with the same key gets the recorded answer; the work does not run
/// again.
pub async fn a_process_dying_after_commit_leaves_the_record_the_resent_call_gets<D: OnceDriver>(
    s: &Setup<D>,
) {
    let (work, toolbox) = died(s, Step::DieAfterCommitFirst, 2, "call-a").await;
    assert_eq!(s.record("call-a").await.0, "ok", "the commit landed");
    let resent = call(&toolbox, "place", 2, "call-a").await.unwrap();
    assert_eq!(resent, placed(2, 1));
    assert_eq!(work.runs.get(), 1, "the work did not run again");
    assert_eq!(s.effects().await, 1, "one effect");
}

/// The commit-fault proxy lets a COMMIT land and answers it with a connection-class error
/// (Postgres: FATAL 08P01; MariaDB: the connection closed, 2013). The COMMIT is ambiguous;
/// the call is retried under the same key — by the runner on a new pooled connection, or,
/// on a tokio-postgres client the runner cannot replace, by the invocation running the
/// handler again — and the claim finds the record: one effect, one answer. The call
/// re-sent later gets the same answer.
pub async fn a_lost_commit_answer_is_resolved_by_the_resent_call<D: OnceDriver>(s: &Setup<D>) {
    let url = s.fx.server_url().expect("a server database").to_owned();
    s.migrate().await;
    let proxy = txretry_testkit::CommitFaultProxy::start(&url).unwrap();
    let via = D::through(proxy.url()).await;
    let work = Work::new(&s.t, Step::Place);
    let (toolbox, retried) = recording(D::tool(&via, "place", &work).once(s.once()));

    proxy.arm_commit_faults(1);
    let first = call(&toolbox, "place", 5, "call-p").await.unwrap();
    assert_eq!(
        proxy.faults_injected(),
        1,
        "the COMMIT landed, its answer was lost"
    );
    assert_eq!(first, placed(5, 1));
    assert_eq!(
        work.runs.get(),
        1,
        "the retry found the record: the work did not run again"
    );
    assert_eq!(
        *retried.lock().unwrap(),
        [(Verdict::Ambiguous, Phase::Commit, 1)],
        "one retry, of the ambiguous COMMIT"
    );
    assert_eq!(s.effects().await, 1, "one effect");

    let resent = call(&toolbox, "place", 5, "call-p").await.unwrap();
    assert_eq!(resent, first);
    assert_eq!(work.runs.get(), 1);
    assert_eq!(s.effects().await, 1, "one effect");
    assert_eq!(s.recorded().await, 1);
}
