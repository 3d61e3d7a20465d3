//! The retry strategies the lab compares, each built fresh for a run with an `on_retry` hook
//! that counts retries by kind.

use std::time::Duration;

use txretry::{Admission, Backoff, Jitter, RetryPolicy};

use crate::cli::PolicyArg;
use crate::stats::RetryCounter;

/// Attempts for the presets that retry "until it works" (the `--policy` help in cli.rs
/// says 50 too).
pub const MANY_ATTEMPTS: u32 = 50;
/// First wait of the exponential presets.
pub const EXP_INITIAL: Duration = Duration::from_millis(2);
/// Growth of the exponential presets.
pub const EXP_FACTOR: f64 = 2.0;
/// Cap on every wait of the exponential presets.
pub const EXP_CAP: Duration = Duration::from_millis(100);

/// A retry strategy the lab can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// `RetryPolicy::disabled()`: one attempt, the error surfaces.
    None,
    /// `RetryPolicy::default()`: 2 attempts, 150 ms × N.
    Default,
    /// [`MANY_ATTEMPTS`] attempts, no wait.
    Immediate,
    /// [`MANY_ATTEMPTS`] attempts, exponential [`EXP_INITIAL`] × [`EXP_FACTOR`] up to
    /// [`EXP_CAP`], full jitter.
    ExpJitter,
    /// `ExpJitter` plus `Admission::per_key()`; every transaction names the rows it
    /// contends on.
    Contention,
    /// `Contention` plus `Admission::in_database(DATABASE_WAIT)`: the keys are also locked
    /// on the database, so several processes take turns too.
    Database,
    /// `Database` with `only_for_contended_keys(CONTENDED_WINDOW)`: the database locks
    /// only for keys that collided lately.
    Adaptive,
    /// `RetryPolicy::high_availability()`: the default policy that also rides out a
    /// switchover or failover of up to [`HA_MAX_OUTAGE`] (not in `--policy all`: ask for
    /// it by name, e.g. with `txretry-bench run --fault`).
    HighAvailability,
}

/// The outage budget of the `high-availability` preset (that of
/// `RetryPolicy::high_availability()`).
pub const HA_MAX_OUTAGE: Duration = Duration::from_secs(60);

/// How long the `database` preset waits for each key's database lock before the attempt
/// fails with a lock timeout (and is retried).
pub const DATABASE_WAIT: Duration = Duration::from_secs(5);

/// How long a collision keeps a key's database locks on under the `adaptive` preset.
pub const CONTENDED_WINDOW: Duration = Duration::from_secs(10);

impl Preset {
    /// Every preset, in the order `--policy all` runs them.
    pub const ALL: [Preset; 7] = [
        Preset::None,
        Preset::Default,
        Preset::Immediate,
        Preset::ExpJitter,
        Preset::Contention,
        Preset::Database,
        Preset::Adaptive,
    ];

    /// The presets `all` leaves out: ask for them by name.
    pub const BY_NAME_ONLY: [Preset; 1] = [Preset::HighAvailability];

    /// Every preset there is, in the order a list of them runs: [`Preset::ALL`], then
    /// [`Preset::BY_NAME_ONLY`].
    pub fn every() -> impl Iterator<Item = Preset> {
        Preset::ALL.into_iter().chain(Preset::BY_NAME_ONLY)
    }

    /// The presets some `--policy` values ask for, each once, in the order of
    /// [`Preset::every`] whatever order they were named in.
    pub fn selected_list(args: &[PolicyArg]) -> Vec<Preset> {
        let named: Vec<Preset> = args.iter().flat_map(|&arg| Preset::selected(arg)).collect();
        Preset::every().filter(|p| named.contains(p)).collect()
    }

    /// The presets a `--policy` value asks for.
    pub fn selected(arg: PolicyArg) -> Vec<Preset> {
        match arg {
            PolicyArg::HighAvailability => vec![Preset::HighAvailability],
            PolicyArg::None => vec![Preset::None],
            PolicyArg::Default => vec![Preset::Default],
            PolicyArg::Immediate => vec![Preset::Immediate],
            PolicyArg::ExpJitter => vec![Preset::ExpJitter],
            PolicyArg::Contention => vec![Preset::Contention],
            PolicyArg::Database => vec![Preset::Database],
            PolicyArg::Adaptive => vec![Preset::Adaptive],
            PolicyArg::All => Preset::ALL.to_vec(),
        }
    }

    /// The name `--policy` takes and reports print.
    pub fn name(self) -> &'static str {
        match self {
            Preset::None => "none",
            Preset::Default => "default",
            Preset::Immediate => "immediate",
            Preset::ExpJitter => "exp-jitter",
            Preset::Contention => "contention",
            Preset::Database => "database",
            Preset::Adaptive => "adaptive",
            Preset::HighAvailability => "high-availability",
        }
    }

    /// One line saying what the preset does.
    pub fn describe(self) -> String {
        let exp = format!(
            "{MANY_ATTEMPTS} attempts, exponential {}ms x{EXP_FACTOR} capped at {}ms, full jitter",
            EXP_INITIAL.as_millis(),
            EXP_CAP.as_millis()
        );
        match self {
            Preset::None => "1 attempt (RetryPolicy::disabled())".to_owned(),
            Preset::Default => "2 attempts, linear 150ms x N (RetryPolicy::default())".to_owned(),
            Preset::Immediate => format!("{MANY_ATTEMPTS} attempts, no wait"),
            Preset::ExpJitter => exp,
            Preset::Contention => format!("{exp}, per-key admission"),
            Preset::Database => format!(
                "{exp}, per-key admission with database locks (wait {}s; none on SQLite)",
                DATABASE_WAIT.as_secs()
            ),
            Preset::Adaptive => format!(
                "{exp}, per-key admission with database locks for keys that collided in the last {}s (wait {}s; none on SQLite)",
                CONTENDED_WINDOW.as_secs(),
                DATABASE_WAIT.as_secs()
            ),
            Preset::HighAvailability => format!(
                "2 attempts, linear 150ms x N, and failover/connection outages ridden out for up to {}s, waits 50ms doubling to 500ms (RetryPolicy::high_availability())",
                HA_MAX_OUTAGE.as_secs()
            ),
        }
    }

    /// Whether transactions should name the keys they contend on.
    pub fn names_keys(self) -> bool {
        matches!(
            self,
            Preset::Contention | Preset::Database | Preset::Adaptive
        )
    }

    /// The policy for one run. Retries are counted into `counter`; `admission` is shared by
    /// every worker of the run (only the contention and database presets use it; the
    /// database preset adds `in_database` to it).
    pub fn policy(self, counter: &RetryCounter, admission: &Admission) -> RetryPolicy {
        if self == Preset::None {
            // Never retries, so there is nothing for a hook to count.
            return RetryPolicy::disabled();
        }
        // `RetryPolicy::default()` cannot take a hook afterwards; the builder starts from
        // the same defaults, so `Default` is the builder untouched plus the hook.
        let counter = counter.clone();
        let mut builder =
            RetryPolicy::builder().on_retry(move |event| counter.record(event.kind()));
        builder = match self {
            Preset::None | Preset::Default => builder,
            // `RetryPolicy::high_availability()` is this builder call plus nothing.
            Preset::HighAvailability => builder.failover(HA_MAX_OUTAGE),
            Preset::Immediate => builder.max_attempts(MANY_ATTEMPTS).backoff(Backoff::None),
            Preset::ExpJitter | Preset::Contention | Preset::Database | Preset::Adaptive => builder
                .max_attempts(MANY_ATTEMPTS)
                .backoff(Backoff::Exponential {
                    initial: EXP_INITIAL,
                    factor: EXP_FACTOR,
                })
                .max_delay(EXP_CAP)
                .jitter(Jitter::Full),
        };
        match self {
            Preset::Contention => builder = builder.admission(admission.clone()),
            Preset::Database => {
                builder = builder.admission(admission.clone().in_database(DATABASE_WAIT));
            }
            Preset::Adaptive => {
                builder = builder.admission(
                    admission
                        .clone()
                        .in_database(DATABASE_WAIT)
                        .only_for_contended_keys(CONTENDED_WINDOW),
                );
            }
            _ => {}
        }
        builder
            .build()
            .unwrap_or_else(|e| unreachable!("preset {} is valid: {e}", self.name()))
    }
}
