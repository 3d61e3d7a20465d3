//! The `once` matrix: every scenario, written once, generic over [`OnceDriver`], and run on
//! every (driver, database) pair by `once_scenarios!` (and, for the server databases,
//! `commit_fault_scenarios!`), expanded in each driver's module under `drivers/`.
//!
//! A lost COMMIT answer needs a network between the client and the database: on SQLite
//! there is none (COMMIT is a function call that always returns its result code), so the
//! SQLite pairs run what replaces it instead: the process dying before COMMIT (nothing
//! recorded: the re-sent call runs the work) and after COMMIT, before it answers (the
//! re-sent call gets the record). Those two run on every pair.
//!
//! Here: the macros, [`Setup`] and the helpers the scenarios share; the scenarios are in
//! `duplicates.rs`, `failures.rs`, `records.rs` and `crashes.rs`, re-exported here for the
//! macros (`crate::scenarios::<name>`).

mod crashes;
mod duplicates;
mod failures;
mod records;

use std::sync::{Arc, Mutex};

use serde_json::Value;
use txretry_core::{Phase, Verdict};
use txretry_tool::{InvokeError, Once, Tool, ToolFailure, Toolbox};

use crate::common::*;
use crate::driver::{OnceDriver, Record};

pub use crashes::{
    a_lost_commit_answer_is_resolved_by_the_resent_call,
    a_process_dying_after_commit_leaves_the_record_the_resent_call_gets,
    a_process_dying_before_commit_leaves_nothing_and_the_resent_call_runs,
};
pub use duplicates::{
    duplicates_queued_behind_a_claim_that_rolls_back_get_one_effect,
    replaying_a_committed_call_returns_the_same_output_and_the_effect_is_once,
    sixteen_concurrent_duplicates_give_one_effect_and_sixteen_identical_answers,
};
pub use failures::{
    a_business_error_is_recorded_its_writes_rolled_back_and_replayed,
    a_business_error_with_a_nul_is_recorded_and_replayed,
    a_permanent_database_error_is_recorded_with_its_code,
    a_timed_out_attempt_is_run_again_because_the_record_decides,
    a_transient_failure_in_the_work_is_retried_and_never_recorded,
    an_unconfirmed_call_says_whether_a_repeat_is_safe,
};
pub use records::{
    a_key_from_the_arguments_makes_two_call_ids_one_call,
    a_table_created_from_the_ddl_is_the_one_calls_use,
    the_table_is_created_on_first_use_migrate_is_idempotent_and_prune_expires,
};

/// One test per scenario for `$driver`.
macro_rules! once_scenarios {
    ($driver:ty) => {
        crate::scenarios::once_scenarios!(@each $driver, 4;
            replaying_a_committed_call_returns_the_same_output_and_the_effect_is_once,
            sixteen_concurrent_duplicates_give_one_effect_and_sixteen_identical_answers,
            duplicates_queued_behind_a_claim_that_rolls_back_get_one_effect,
            a_business_error_is_recorded_its_writes_rolled_back_and_replayed,
            a_permanent_database_error_is_recorded_with_its_code,
            a_business_error_with_a_nul_is_recorded_and_replayed,
            a_transient_failure_in_the_work_is_retried_and_never_recorded,
            a_key_from_the_arguments_makes_two_call_ids_one_call,
            the_table_is_created_on_first_use_migrate_is_idempotent_and_prune_expires,
            a_table_created_from_the_ddl_is_the_one_calls_use,
            a_timed_out_attempt_is_run_again_because_the_record_decides,
            an_unconfirmed_call_says_whether_a_repeat_is_safe,
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
