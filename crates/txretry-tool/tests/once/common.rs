//! What every scenario shares: arguments and output of the test tools, what their work
//! does ([`Work`]), counters, a gate that holds the first run inside its transaction, fast
//! policies.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use txretry_core::{Backoff, RetryPolicy};
use txretry_tool::{BoxError, BusinessError, Caller, InvokeError, Toolbox};

/// The arguments of the test tools.
#[derive(Clone, Copy, Debug, Deserialize, schemars::JsonSchema)]
pub struct Args {
    /// Which item; a negative one is refused (a business error).
    pub item: i64,
}

/// What the `place` tool answers: the item, and how many effect rows existed right after
/// its own insert (a second run would say 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    pub item: i64,
    pub effects: i64,
    pub note: String,
}

/// `attempts` attempts, 1 ms constant backoff.
pub fn fast(attempts: u32) -> RetryPolicy {
    fast_builder(attempts).build().unwrap()
}

/// [`fast`], counting its retries in `retries`.
pub fn fast_counting(attempts: u32, retries: &Counter) -> RetryPolicy {
    let retries = retries.clone();
    fast_builder(attempts)
        .on_retry(move |_| {
            retries.bump();
        })
        .build()
        .unwrap()
}

fn fast_builder(attempts: u32) -> txretry_core::RetryPolicyBuilder {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .backoff(Backoff::Constant(Duration::from_millis(1)))
}

/// A counter shared with handlers.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicU32>);

impl Counter {
    pub fn bump(&self) -> u32 {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn get(&self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Holds every run of the work inside its transaction until opened.
#[derive(Clone)]
pub struct Gate(Arc<tokio::sync::Semaphore>);

impl Gate {
    pub fn closed() -> Gate {
        Gate(Arc::new(tokio::sync::Semaphore::new(0)))
    }

    pub fn open() -> Gate {
        let gate = Gate::closed();
        gate.release();
        gate
    }

    pub async fn pass(&self) {
        self.0.acquire().await.unwrap().forget();
    }

    /// [`Gate::pass`] from a blocking tool's thread (one of tokio's blocking threads, so
    /// the runtime's handle is at hand).
    pub fn pass_blocking(&self) {
        tokio::runtime::Handle::current().block_on(self.pass());
    }

    pub fn release(&self) {
        self.0.add_permits(10_000);
    }
}

pub fn anyone() -> Caller {
    Caller::new(["user"])
}

/// A call's answer as text, for comparing answers: the output's JSON, or the failure's
/// kind, error and attempts (whether it was replayed left out: a repeat's is).
pub fn answer(result: &Result<serde_json::Value, InvokeError>) -> String {
    match result {
        Ok(output) => format!("ok {output}"),
        Err(InvokeError::Failed(failure)) => format!(
            "failed {} {:?} after {} attempt(s), committed {}",
            failure.kind(),
            failure.last_error().to_string(),
            failure.attempts().len(),
            failure.committed()
        ),
        Err(other) => format!("other {other}"),
    }
}

/// Calls the test tool `tool` with `item` under `key`, as anyone; a call that hangs fails
/// the test.
pub async fn call(
    toolbox: &Toolbox,
    tool: &'static str,
    item: i64,
    key: &str,
) -> Result<serde_json::Value, InvokeError> {
    within(toolbox.invoke(&anyone(), tool, serde_json::json!({ "item": item }), key)).await
}

/// What the test tool answers for `item` when its insert made `effects` rows.
pub fn placed(item: i64, effects: i64) -> serde_json::Value {
    serde_json::json!({"item": item, "effects": effects, "note": "placed"})
}

pub use txretry_testkit::unique_name;
pub use txretry_testkit::wait::{poll_until, within};

/// What a run of the test tool's work does, step by step, on any driver:
///
/// 1. counts the run (`runs`; the run's number is `n`);
/// 2. inserts an effect row `(item, 'placed')` into `effects` (no key: a second run of the
///    work shows as a second row);
/// 3. waits at `gate`;
/// 4. does what `step` says for run `n` ([`Step`]);
/// 5. answers [`Placed`], with the number of effect rows it sees.
///
/// After `ToolContext::once*` returned, [`Work::answered`] may end the handler as a process
/// dying before it answers would ([`Step::DieAfterCommitFirst`]).
#[derive(Clone)]
pub struct Work {
    pub effects: String,
    pub runs: Counter,
    pub gate: Gate,
    pub step: Step,
    /// How many times a handler got past its `once` call.
    pub answers: Counter,
}

/// What the work does after its insert.
#[derive(Clone, Debug)]
pub enum Step {
    /// Refuses a negative item: a business error.
    Place,
    /// Inserts the same key twice into this table: a unique violation, permanent.
    Duplicate(String),
    /// Refuses every call with this message: a business error.
    Refuse(&'static str),
    /// The first run fails with a driver's own deadlock phrase: transient.
    FlakyFirst,
    /// The first run never finishes (a blocking one: until its attempt is cancelled).
    HangFirst,
    /// Every run never finishes.
    HangAlways,
    /// The first run panics inside its transaction, before COMMIT: the process dying then.
    DieBeforeCommitFirst,
    /// The first handler panics after its `once` call returned (committed): the process
    /// dying before it could answer.
    DieAfterCommitFirst,
}

impl Work {
    pub fn new(effects: &str, step: Step) -> Work {
        Work {
            effects: effects.to_owned(),
            runs: Counter::default(),
            gate: Gate::open(),
            step,
            answers: Counter::default(),
        }
    }

    pub fn gated(mut self, gate: &Gate) -> Work {
        self.gate = gate.clone();
        self
    }

    /// Step 2's statement.
    pub fn insert_sql(&self, item: i64) -> String {
        format!(
            "INSERT INTO {} (item, note) VALUES ({item}, 'placed')",
            self.effects
        )
    }

    /// Step 4's statement, if the step has one (it fails).
    pub fn extra_sql(&self) -> Option<String> {
        match &self.step {
            Step::Duplicate(keyed) => Some(format!("INSERT INTO {keyed} VALUES (1), (1)")),
            _ => None,
        }
    }

    /// Whether run `n` never finishes.
    pub fn hangs(&self, n: u32) -> bool {
        matches!(
            (&self.step, n),
            (Step::HangFirst, 1) | (Step::HangAlways, _)
        )
    }

    /// Step 4's verdict for run `n` (after [`Work::extra_sql`]).
    pub fn check(&self, n: u32, item: i64) -> Result<(), BoxError> {
        match (&self.step, n) {
            (Step::Place, _) if item < 0 => Err(BoxError::from(BusinessError::new(
                "unknown_item",
                format!("there is no item {item}"),
            ))),
            (Step::Refuse(message), _) => {
                Err(BoxError::from(BusinessError::new("refused", *message)))
            }
            (Step::FlakyFirst, 1) => {
                Err(BoxError::from(std::io::Error::other("deadlock detected")))
            }
            (Step::DieBeforeCommitFirst, 1) => panic!("the process dies before COMMIT"),
            _ => Ok(()),
        }
    }

    /// Step 5's statement.
    pub fn count_sql(&self) -> String {
        format!("SELECT count(*) FROM {}", self.effects)
    }

    pub fn placed(&self, item: i64, effects: i64) -> Placed {
        Placed {
            item,
            effects,
            note: "placed".to_owned(),
        }
    }

    /// Called by the handler once its `once` call returned.
    pub fn answered(&self) {
        let n = self.answers.bump();
        if matches!(self.step, Step::DieAfterCommitFirst) && n == 1 {
            panic!("the process dies after COMMIT, before it answers");
        }
    }
}
