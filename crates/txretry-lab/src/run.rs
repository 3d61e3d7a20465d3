//! One run: fresh tables, one policy, `workers` tasks looping on the workload's
//! transaction through `txretry::sqlx::transaction_with` until the time is up, then the
//! invariant check.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use sqlx::Pool;
use tokio::task::JoinSet;
use tokio::time::Instant;
use txretry::{Admission, RetryBudget, RetryPolicy, StopReason, TxOptions};

use crate::backend::LabDb;
use crate::cli::{RunArgs, Workload};
use crate::error::TxError;
use crate::error::describe;
use crate::events::{self, Commit, EventLog, Failure};
use crate::presets::Preset;
use crate::progress::Progress;
use crate::report::Appendix;
use crate::signals;
use crate::stats::{Live, RetryCounter, Tally};
use crate::target::Target;
use crate::workload::{Invariant, Schema};

/// What a run is asked to do.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The transaction every worker runs.
    pub workload: Workload,
    /// Accounts or hot rows.
    pub rows: u32,
    /// Concurrent workers.
    pub workers: usize,
    /// How long workers start new transactions.
    pub duration: Duration,
    /// Isolation level and SQLite begin behaviour for every transaction.
    pub options: TxOptions,
    /// The retry strategy.
    pub preset: Preset,
    /// The number of this process's first worker among every process's workers (0 in a
    /// single-process run): transfer ids stay unique across processes.
    pub first_worker: u32,
    /// Whether to note every failed attempt with its time ([`Measured::failures`]), for
    /// lining the run up with what happened beside it (the bench's `--fault`).
    pub timed: bool,
    /// While set, the run goes on past its deadline: something beside it (a fault's
    /// command, in the bench) has not finished, and the run must see it to its end.
    pub in_flight: Option<Arc<AtomicBool>>,
    /// How often the invariant check is tried before it counts as failed (the pause
    /// between tries: half a second): after a failover, a pooled connection may still be
    /// one the old leader dropped.
    pub check_tries: u32,
}

impl RunSpec {
    /// The run `args` ask for on `target`, with `rows` rows: the first preset they name,
    /// in a single process, with nothing beside it.
    pub fn of(args: &RunArgs, target: &Target, rows: u32) -> RunSpec {
        let mut options = TxOptions::new().sqlite_begin(args.sqlite_begin.begin());
        if let (false, Some(level)) = (target.is_sqlite(), args.isolation) {
            options = options.isolation(level.level());
        }
        RunSpec {
            workload: args.workload,
            rows,
            workers: args.workers,
            duration: args.duration,
            options,
            preset: Preset::selected_list(&args.policy)
                .first()
                .copied()
                .unwrap_or(Preset::Default),
            first_worker: 0,
            timed: false,
            in_flight: None,
            check_tries: 1,
        }
    }
}

/// What a run measured, and what the check of its tables found.
#[derive(Debug)]
pub struct RunResult {
    /// The strategy that ran.
    pub preset: Preset,
    /// What the workers did (with several processes: all of them, merged).
    pub measured: Measured,
    /// The check of the tables afterwards.
    pub invariant: Invariant,
    /// With several processes: each one's commits, in process order (empty otherwise).
    pub committed_by_process: Vec<u64>,
    /// What the place adds to the report (the bench's fault timelines).
    pub appendix: Option<Appendix>,
}

impl RunResult {
    /// The result of a run in one process, with nothing appended.
    pub fn new(preset: Preset, measured: Measured, invariant: Invariant) -> RunResult {
        RunResult {
            preset,
            measured,
            invariant,
            committed_by_process: Vec::new(),
            appendix: None,
        }
    }
}

/// What the workers of a run did: everything but the invariant check.
#[derive(Debug)]
pub struct Measured {
    /// Every worker's counts, merged.
    pub tally: Tally,
    /// Retries by kind, from the policy's hook.
    pub retries: RetryCounter,
    /// When the first transaction started (wall clock, to line up several processes).
    pub started: SystemTime,
    /// From the first transaction's start until the last worker finished.
    pub elapsed: Duration,
    /// Whether a stop request (Ctrl-C) cut the run short.
    pub interrupted: bool,
    /// With [`RunSpec::timed`]: every failed attempt, with its time (empty otherwise).
    pub failures: Vec<Failure>,
}

/// Nothing measured: no counts, started at the epoch, no time elapsed.
impl Default for Measured {
    fn default() -> Self {
        Measured {
            tally: Tally::default(),
            retries: RetryCounter::default(),
            started: SystemTime::UNIX_EPOCH,
            elapsed: Duration::ZERO,
            interrupted: false,
            failures: Vec::new(),
        }
    }
}

/// The pause between two tries of the invariant check ([`RunSpec::check_tries`]).
const CHECK_PAUSE: Duration = Duration::from_millis(500);

/// How long dropping the tables may take when quitting.
const QUIT_DROP_WAIT: Duration = Duration::from_secs(5);

/// Shared by a run's workers.
struct Ctx<DB: sqlx::Database> {
    pool: Pool<DB>,
    policy: RetryPolicy,
    schema: Arc<Schema>,
    options: TxOptions,
    names_keys: bool,
    deadline: Instant,
    stop: Arc<AtomicBool>,
    live: Live,
    /// With [`RunSpec::timed`]: where failed calls are noted with their time.
    log: Option<Arc<EventLog>>,
    /// [`RunSpec::in_flight`]: while set, the run goes on past its deadline.
    in_flight: Option<Arc<AtomicBool>>,
    /// Each worker's transaction in flight, cut short once the run is over.
    current: Vec<Current>,
}

/// A worker's transaction in flight: its retry budget, which the run drains once it is
/// over, so that the transaction begins no new retry. Under contention one transaction can
/// retry for minutes (50 attempts, each a lock wait), and Ctrl-C or the deadline must end
/// the run within the attempts in flight, not within every retry of every worker. The
/// budget reaches the retries that fail before the body runs (an admission lock not
/// granted, a BEGIN that failed), which no check inside the transaction would see.
#[derive(Default)]
struct Current {
    budget: std::sync::Mutex<Option<RetryBudget>>,
    /// The run took retries from the budget.
    cut: AtomicBool,
}

impl Current {
    /// `policy` for a new transaction, with a budget of its own.
    fn begin(&self, policy: &RetryPolicy) -> RetryPolicy {
        let budget = RetryBudget::for_policy(policy);
        let mut current = self.budget.lock().unwrap_or_else(|e| e.into_inner());
        *current = Some(budget.clone());
        self.cut.store(false, Ordering::Relaxed);
        policy.with_budget(budget)
    }

    /// Takes every retry left: the transaction's next failure is its last.
    fn cut_short(&self) {
        let current = self.budget.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(budget) = current.as_ref() {
            let mut taken = false;
            while budget.take_retry() {
                taken = true;
            }
            if taken {
                self.cut.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Whether a transaction that stopped for `reason` was cut short by the end of the run
    /// (rather than given up on by its policy).
    fn was_cut(&self, reason: StopReason) -> bool {
        reason == StopReason::AttemptsExhausted && self.cut.load(Ordering::Relaxed)
    }
}

impl<DB: sqlx::Database> Ctx<DB> {
    fn over(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || (Instant::now() >= self.deadline
                && !self
                    .in_flight
                    .as_ref()
                    .is_some_and(|b| b.load(Ordering::SeqCst)))
    }
}

/// Runs `spec` on `pool`. `stop` ends the run early (Ctrl-C). Errors are those of setting
/// up the tables; everything that happens to the transactions is counted instead.
pub async fn run<DB: LabDb>(
    pool: &Pool<DB>,
    spec: &RunSpec,
    stop: &Arc<AtomicBool>,
) -> Result<RunResult, sqlx::Error> {
    let schema = Arc::new(Schema::new::<DB>(spec.workload, spec.rows));
    schema.create(pool).await?;
    let measured = drive(pool, &schema, spec, stop, spec.preset.name()).await;
    if signals::quitting() {
        // Aborted transactions: nothing complete to check. Drop the tables, but do not
        // let a hung server hold up quitting.
        match tokio::time::timeout(QUIT_DROP_WAIT, schema.drop_tables(pool)).await {
            Ok(Ok(())) => eprintln!("dropped this run's tables ({}_*)", schema.prefix()),
            _ => eprintln!(
                "could not drop this run's tables ({}_*) in time; drop them by hand",
                schema.prefix()
            ),
        }
        let invariant = Invariant::passed("not checked: quit".into());
        return Ok(RunResult::new(spec.preset, measured, invariant));
    }
    // What runs beside the run (a fault's command) finishes before the check, so that the
    // check reads the final primary, even when Ctrl-C stopped the workers early.
    while spec
        .in_flight
        .as_ref()
        .is_some_and(|b| b.load(Ordering::SeqCst))
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let invariant = check(pool, &schema, &measured.tally, spec.check_tries).await;
    // Best effort: a table left behind is named txlab_<pid>_<run>_… and harms nothing.
    for _ in 0..spec.check_tries.max(1) {
        if schema.drop_tables(pool).await.is_ok() {
            break;
        }
        tokio::time::sleep(CHECK_PAUSE).await;
    }
    Ok(RunResult::new(spec.preset, measured, invariant))
}

/// The invariant check of `schema`'s tables after the commits `tally` counted, tried up to
/// `tries` times (at least once) while the tables cannot be read; a failed check when they
/// never could.
pub async fn check<DB: LabDb>(
    pool: &Pool<DB>,
    schema: &Schema,
    tally: &Tally,
    tries: u32,
) -> Invariant {
    let (committed, maybe) = (&tally.committed_keys, &tally.maybe_committed_keys);
    let mut attempt = 1;
    loop {
        match schema.check(pool, committed, maybe).await {
            Ok(found) => return found,
            Err(e) if attempt >= tries => {
                return Invariant::failed(format!("could not check the tables: {}", describe(&e)));
            }
            Err(_) => tokio::time::sleep(CHECK_PAUSE).await,
        }
        attempt += 1;
    }
}

/// Runs `spec`'s workers on tables that exist already, until the time is up or `stop`
/// is set, with a progress bar labelled `label`. Creates, checks and drops nothing.
pub async fn drive<DB: LabDb>(
    pool: &Pool<DB>,
    schema: &Arc<Schema>,
    spec: &RunSpec,
    stop: &Arc<AtomicBool>,
    label: &str,
) -> Measured {
    let log = spec.timed.then(|| Arc::new(EventLog::default()));
    let retries = log
        .clone()
        .map_or_else(RetryCounter::default, RetryCounter::logging);
    // One admission for the whole run: every worker's policy is this one policy.
    let admission = Admission::per_key();
    let policy = spec.preset.policy(&retries, &admission);
    let started = SystemTime::now();
    let start = Instant::now();
    let ctx = Arc::new(Ctx {
        pool: pool.clone(),
        policy,
        schema: schema.clone(),
        options: spec.options.clone(),
        names_keys: spec.preset.names_keys(),
        deadline: start + spec.duration,
        stop: stop.clone(),
        live: Live::default(),
        log: log.clone(),
        in_flight: spec.in_flight.clone(),
        current: (0..spec.workers).map(|_| Current::default()).collect(),
    });
    let progress = Progress::new(label, spec.duration);
    let mut workers = JoinSet::new();
    for w in 0..spec.workers {
        let id = spec.first_worker.saturating_add(w as u32);
        let ctx = ctx.clone();
        workers.spawn(async move { (w, worker(ctx, w, id).await) });
    }
    // Each worker's tally with its index, merged in worker order once all are done.
    let mut tallies: Vec<(usize, Tally)> = Vec::with_capacity(spec.workers);
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            joined = workers.join_next() => match joined {
                Some(Ok(done)) => tallies.push(done),
                // A worker that was aborted (quit now) contributes nothing; one that
                // panicked (a bug, never user input) is reported on stderr.
                Some(Err(e)) if e.is_cancelled() => {}
                Some(Err(e)) => eprintln!("txretry-lab: a worker stopped unexpectedly: {e}"),
                None => break,
            },
            _ = ticker.tick() => {
                if ctx.over() {
                    ctx.current.iter().for_each(Current::cut_short);
                }
                if signals::quitting() {
                    // Dropping a transaction rolls it back; its worker's counts are lost,
                    // and no report is printed after a quit.
                    workers.abort_all();
                }
                let n = |count: &std::sync::atomic::AtomicU64| count.load(Ordering::Relaxed);
                let live = &ctx.live;
                let counts = format!(
                    "{} committed  {} refused  {} failed  {} retries",
                    n(&live.committed),
                    n(&live.refused),
                    n(&live.failed),
                    retries.total()
                );
                progress.update(start.elapsed(), &counts);
            }
        }
    }
    let elapsed = start.elapsed();
    progress.finish();
    tallies.sort_by_key(|&(w, _)| w);
    let mut tally = Tally::default();
    for (_, t) in tallies {
        tally.merge(t);
    }
    // Every attempt, failed ones included, whether or not it reached the transaction's
    // body (an admission lock not granted, a BEGIN that failed): the first ones, plus
    // every retry the policy began.
    let live = &ctx.live;
    tally.attempts = live.begun.load(Ordering::Relaxed) + retries.total();
    tally.cut_short = live.cut_short.load(Ordering::Relaxed);
    Measured {
        tally,
        retries,
        started,
        elapsed,
        interrupted: stop.load(Ordering::Relaxed),
        failures: log.map(|log| log.failures()).unwrap_or_default(),
    }
}

/// One worker: transactions back to back until the run is over.
///
/// The transaction closures own what they use (`async move`, an `Arc` of the run's
/// context): a closure that captures any reference, even a `&'static` one, makes rustc
/// unable to prove the runner's future `Send` for `tokio::spawn` ("implementation of
/// `Send` is not general enough"), a compiler limitation with generic `AsyncFnMut`.
async fn worker<DB: LabDb>(ctx: Arc<Ctx<DB>>, index: usize, worker: u32) -> Tally {
    let mut tally = Tally::default();
    let mut rng = fastrand::Rng::new();
    let mut seq: u32 = 0;
    while !ctx.over() {
        let started = Instant::now();
        let job = ctx.schema.next_job(&mut rng, worker, seq);
        seq = seq.wrapping_add(1);
        let mut options = ctx.options.clone();
        if ctx.names_keys {
            // A row's key names its table too: database admission locks are server-wide
            // (MySQL's GET_LOCK) or database-wide (Postgres' advisory locks), and another
            // run's row 1 must not make this run wait.
            for row in job.contends_on() {
                options = options.contends_on((ctx.schema.prefix(), row));
            }
        }
        ctx.live.begun.fetch_add(1, Ordering::Relaxed);
        let current = &ctx.current[index];
        let policy = current.begin(&ctx.policy);
        let shared = ctx.clone();
        let result =
            txretry::sqlx::transaction_with(&ctx.pool, &policy, &options, async move |tx| {
                shared.schema.attempt(tx, &job).await
            })
            .await;
        let key = job.key();
        match result {
            // Cut short by the end of the run: rolled back, and neither a commit nor a
            // failure (its policy would have retried it).
            Err(e) if current.was_cut(e.outcome().stop_reason()) => {
                ctx.live.cut_short.fetch_add(1, Ordering::Relaxed);
            }
            Ok(port) => {
                if let Some(port) = port {
                    tally.commits.push(Commit {
                        at_ms: events::now_ms(),
                        port,
                    });
                }
                tally.committed += 1;
                tally.record_latency(started.elapsed());
                tally.committed_keys.push(key);
                ctx.live.committed.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if matches!(e.error(), TxError::InsufficientFunds { .. }) => {
                tally.business_failed += 1;
                ctx.live.refused.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                // The runner's own verdict on the last attempt (ambiguous when a COMMIT
                // may have landed), not a second classification of the error.
                let kind = tally.record_failure(e.outcome().verdict(), || e.to_string());
                if let Some(log) = &ctx.log {
                    log.failure(kind, false);
                }
                // The lab never declares its transactions idempotent, so an ambiguous
                // COMMIT is always the last attempt: its effect may be in the tables.
                if e.outcome().may_have_committed() {
                    tally.maybe_committed_keys.push(key);
                }
                ctx.live.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    tally
}
