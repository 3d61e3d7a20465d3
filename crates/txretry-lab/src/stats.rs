//! Counting during a run (per worker, merged at the end; retries through the policy hook)
//! and the numbers derived from the counts: percentiles (from an HDR histogram of the
//! latencies) and rates.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use txretry::{TransientKind, Verdict};

use crate::events::{Commit, EventLog};

/// Name used for retries of a failure that had no transient kind (an ambiguous commit,
/// retried only for a call declared idempotent with `TxOptions::idempotent(true)`; the lab
/// never declares its transactions idempotent), and for transactions that failed with an
/// ambiguous verdict (a COMMIT that may have landed).
pub const AMBIGUOUS: &str = "ambiguous";

/// Retries by kind, counted from the policy's `on_retry` hook. Clones share the counts.
#[derive(Clone, Debug)]
pub struct RetryCounter {
    /// One slot per [`TransientKind::ALL`] entry, then one for [`AMBIGUOUS`].
    slots: Arc<Vec<AtomicU64>>,
    /// Where each retry is also noted with its time ([`RunSpec::timed`](crate::run::RunSpec::timed)).
    log: Option<Arc<EventLog>>,
}

impl Default for RetryCounter {
    fn default() -> Self {
        RetryCounter {
            slots: Arc::new(
                (0..=TransientKind::ALL.len())
                    .map(|_| AtomicU64::new(0))
                    .collect(),
            ),
            log: None,
        }
    }
}

impl RetryCounter {
    /// A counter that also notes each retry, with its time, in `log`.
    pub fn logging(log: Arc<EventLog>) -> RetryCounter {
        RetryCounter {
            log: Some(log),
            ..RetryCounter::default()
        }
    }

    /// Counts one retry of `kind` (`None`: an ambiguous failure).
    pub fn record(&self, kind: Option<TransientKind>) {
        let slot = kind
            .and_then(|k| TransientKind::ALL.iter().position(|&x| x == k))
            .unwrap_or(TransientKind::ALL.len());
        self.slots[slot].fetch_add(1, Ordering::Relaxed);
        if let Some(log) = &self.log {
            log.failure(kind.map_or(AMBIGUOUS, TransientKind::as_str), true);
        }
    }

    /// Retries so far, all kinds.
    pub fn total(&self) -> u64 {
        self.slots.iter().map(|s| s.load(Ordering::Relaxed)).sum()
    }

    /// Adds counts by kind name (as [`RetryCounter::by_kind`] names them), e.g. another
    /// process's. Errs on a name no kind has.
    pub fn add_by_kind(&self, counts: &BTreeMap<String, u64>) -> Result<(), String> {
        for (name, &n) in counts {
            let slot = if name == AMBIGUOUS {
                TransientKind::ALL.len()
            } else {
                TransientKind::ALL
                    .iter()
                    .position(|k| k.as_str() == name)
                    .ok_or_else(|| format!("unknown retry kind {name:?}"))?
            };
            self.slots[slot].fetch_add(n, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Every kind with its count, zeros included, so the JSON shape never changes.
    pub fn by_kind(&self) -> BTreeMap<String, u64> {
        let names = TransientKind::ALL
            .iter()
            .map(|k| k.as_str())
            .chain([AMBIGUOUS]);
        names
            .zip(self.slots.iter())
            .map(|(name, n)| (name.to_owned(), n.load(Ordering::Relaxed)))
            .collect()
    }
}

/// Counts shared by every worker while a run goes on, for the progress bar.
#[derive(Debug, Default)]
pub struct Live {
    /// Transactions committed so far.
    pub committed: AtomicU64,
    /// Transactions whose database error surfaced so far (lost to the caller).
    pub failed: AtomicU64,
    /// Transactions refused for a business reason so far (a real outcome, not an error).
    pub refused: AtomicU64,
    /// Transactions begun so far (their first attempts).
    pub begun: AtomicU64,
    /// Transactions a retry of which the end of the run cut short before it began.
    pub cut_short: AtomicU64,
}

/// What one worker saw; merged into one at the end of a run.
#[derive(Debug, Default)]
pub struct Tally {
    /// Transactions that committed.
    pub committed: u64,
    /// Transactions refused for a business reason (insufficient funds): a real outcome.
    pub business_failed: u64,
    /// Transactions whose database error surfaced, by verdict (`permanent`, `ambiguous` or
    /// a transient kind's name).
    pub failed_by_kind: BTreeMap<String, u64>,
    /// The first error message of each kind in `failed_by_kind` (not yet scrubbed of
    /// passwords: see `report.rs`).
    pub first_errors: BTreeMap<String, String>,
    /// Transactions the end of the run cut short: its policy would have retried their
    /// last failure (filled in from [`Live`] at the end of a run).
    pub cut_short: u64,
    /// Every attempt, whether or not it reached the transaction's body: first attempts and
    /// retries (filled in from [`Live`] at the end of a run).
    pub attempts: u64,
    /// Latency of each committed transaction, retries and waits included, in microseconds.
    pub latencies: Latencies,
    /// One key per commit: the transfer id (transfer) or the row id (hot-rows), for the
    /// invariant check.
    pub committed_keys: Vec<i64>,
    /// One key per transaction whose COMMIT may have landed (the runner's verdict was
    /// ambiguous): the invariant check accepts its effect once or not at all.
    pub maybe_committed_keys: Vec<i64>,
    /// History workload: when each commit was acknowledged and the node it landed on.
    pub commits: Vec<Commit>,
}

impl Tally {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: Tally) {
        self.committed += other.committed;
        self.business_failed += other.business_failed;
        for (kind, n) in other.failed_by_kind {
            *self.failed_by_kind.entry(kind).or_default() += n;
        }
        for (kind, message) in other.first_errors {
            self.first_errors.entry(kind).or_insert(message);
        }
        self.cut_short += other.cut_short;
        self.attempts += other.attempts;
        self.latencies.add(&other.latencies);
        self.committed_keys.extend(other.committed_keys);
        self.maybe_committed_keys.extend(other.maybe_committed_keys);
        self.commits.extend(other.commits);
    }

    /// Transactions that failed with a database error (not a business refusal).
    pub fn failed(&self) -> u64 {
        self.failed_by_kind.values().sum()
    }

    /// Counts one failed transaction by its verdict; `message` (the error) is kept when it
    /// is the first of its kind: a count says how often, the message says why. Returns the
    /// verdict's name.
    pub fn record_failure(
        &mut self,
        verdict: Verdict,
        message: impl FnOnce() -> String,
    ) -> &'static str {
        let name = match verdict {
            Verdict::Transient(kind) => kind.as_str(),
            Verdict::Ambiguous => AMBIGUOUS,
            _ => "permanent",
        };
        *self.failed_by_kind.entry(name.to_owned()).or_default() += 1;
        self.first_errors
            .entry(name.to_owned())
            .or_insert_with(message);
        name
    }

    /// Records one committed transaction's latency.
    pub fn record_latency(&mut self, latency: Duration) {
        self.latencies
            .record(u64::try_from(latency.as_micros()).unwrap_or(u64::MAX));
    }
}

/// Significant decimal digits the latency histogram keeps: a latency is known to 0.1 %.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Latencies in microseconds, in an HDR histogram: constant memory however many there
/// are, mergeable across workers and processes, each value kept to 3 significant digits.
#[derive(Clone, Debug, PartialEq)]
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies(Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is valid"))
    }
}

impl Latencies {
    /// Records one latency (microseconds).
    pub fn record(&mut self, us: u64) {
        // The histogram grows to take any value; should it not, saturate rather than
        // lose the sample.
        if self.0.record(us).is_err() {
            self.0.saturating_record(us);
        }
    }

    /// Adds every latency of `other`.
    pub fn add(&mut self, other: &Latencies) {
        self.0
            .add(&other.0)
            .expect("histograms of the same precision that resize merge");
    }

    /// The nearest-rank percentile `p` (0 to 100): the smallest recorded value with at
    /// least `p` percent of all at or below it, to the histogram's precision (the lowest
    /// value of its bucket). `None` without latencies.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.0.is_empty() {
            return None;
        }
        let value = if p >= 100.0 {
            self.0.max()
        } else {
            self.0.value_at_quantile(p.clamp(0.0, 100.0) / 100.0)
        };
        Some(self.0.lowest_equivalent(value))
    }

    /// The histogram itself (for shipping it between processes: `txretry-bench run`).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.0
    }

    /// Latencies from a histogram of any precision, kept at the lab's own, so that later
    /// adds always fit; errs when a value does not fit in it.
    pub fn from_histogram(
        histogram: &Histogram<u64>,
    ) -> Result<Latencies, hdrhistogram::errors::AdditionError> {
        let mut latencies = Latencies::default();
        latencies.0.add(histogram)?;
        Ok(latencies)
    }
}

impl FromIterator<u64> for Latencies {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        let mut latencies = Latencies::default();
        for us in iter {
            latencies.record(us);
        }
        latencies
    }
}

/// Latency percentiles in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Slowest.
    pub max: Option<f64>,
}

impl Percentiles {
    /// Percentiles of every latency (nearest rank, to 3 significant digits).
    pub fn of(latencies: &Latencies) -> Self {
        let ms = |p: f64| latencies.percentile(p).map(|us| us as f64 / 1000.0);
        Percentiles {
            p50: ms(50.0),
            p95: ms(95.0),
            p99: ms(99.0),
            max: ms(100.0),
        }
    }
}

/// `numerator / denominator`, or `None` when the denominator is zero.
pub fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}
