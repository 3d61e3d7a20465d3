//! What a child reports (one line of JSON) and how the parent merges the reports.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use txretry_lab::presets::Preset;
use txretry_lab::run::Measured;
use txretry_lab::stats::{Latencies, RetryCounter, Tally};

/// What one child measured, as it prints it (one line of JSON on stdout).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildReport {
    /// The preset's name.
    pub policy: String,
    /// Transactions committed.
    pub committed: u64,
    /// Transactions refused for a business reason.
    pub business_failed: u64,
    /// Transactions whose database error surfaced, by verdict.
    pub failed_by_kind: BTreeMap<String, u64>,
    /// The first error message of each failed kind (scrubbed by the parent).
    #[serde(default)]
    pub first_errors: BTreeMap<String, String>,
    /// Transactions the end of the run cut short.
    #[serde(default)]
    pub cut_short: u64,
    /// Every attempt.
    pub attempts: u64,
    /// Retries by kind.
    pub retries_by_kind: BTreeMap<String, u64>,
    /// When its first transaction started, microseconds since the Unix epoch.
    pub started_unix_us: u64,
    /// How long it ran, microseconds.
    pub elapsed_us: u64,
    /// Whether a stop request cut it short.
    pub interrupted: bool,
    /// Latency of each commit, microseconds, as a histogram (base64 of its V2 encoding):
    /// the parent merges the children's and takes percentiles over all of them.
    #[serde(with = "histogram_base64")]
    pub latencies: Latencies,
    /// One key per commit, for the invariant check (transfer ids or row ids).
    pub committed_keys: Vec<i64>,
    /// One key per transaction whose COMMIT may have landed.
    #[serde(default)]
    pub maybe_committed_keys: Vec<i64>,
}

impl ChildReport {
    /// The report of `measured`, run with `preset`.
    pub fn new(preset: Preset, measured: Measured) -> ChildReport {
        let t = measured.tally;
        ChildReport {
            policy: preset.name().to_owned(),
            committed: t.committed,
            business_failed: t.business_failed,
            failed_by_kind: t.failed_by_kind,
            first_errors: t.first_errors,
            cut_short: t.cut_short,
            attempts: t.attempts,
            retries_by_kind: measured.retries.by_kind(),
            started_unix_us: micros(
                measured
                    .started
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default(),
            ),
            elapsed_us: micros(measured.elapsed),
            interrupted: measured.interrupted,
            latencies: t.latencies,
            committed_keys: t.committed_keys,
            maybe_committed_keys: t.maybe_committed_keys,
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Merges the children's reports: counts add up, latency histograms merge and committed keys
/// are pooled (percentiles are then computed over all of them, not averaged), and the elapsed
/// time is the span from the first child's start to the last one's end, by the wall
/// clock they share (or the longest child's own time, should the clock have been stepped
/// meanwhile: a span shorter than that, or over twice it). Also each child's commits, in
/// the order of the reports.
pub fn aggregate(reports: Vec<ChildReport>) -> Result<(Measured, Vec<u64>), String> {
    let mut tally = Tally::default();
    let retries = RetryCounter::default();
    let mut interrupted = false;
    let mut first_start = u64::MAX;
    let mut last_end = 0u64;
    let mut longest = 0u64;
    let committed_by_process = reports.iter().map(|r| r.committed).collect();
    for r in reports {
        retries.add_by_kind(&r.retries_by_kind)?;
        interrupted |= r.interrupted;
        first_start = first_start.min(r.started_unix_us);
        last_end = last_end.max(r.started_unix_us.saturating_add(r.elapsed_us));
        longest = longest.max(r.elapsed_us);
        tally.merge(Tally {
            committed: r.committed,
            business_failed: r.business_failed,
            failed_by_kind: r.failed_by_kind,
            first_errors: r.first_errors,
            cut_short: r.cut_short,
            attempts: r.attempts,
            latencies: r.latencies,
            committed_keys: r.committed_keys,
            maybe_committed_keys: r.maybe_committed_keys,
            // Only a `--fault` run (one process) uses them.
            commits: Vec::new(),
        });
    }
    let span = last_end.saturating_sub(first_start);
    let elapsed = if (longest..=longest.saturating_mul(2)).contains(&span) {
        span
    } else {
        longest
    };
    let started = if first_start == u64::MAX {
        0
    } else {
        first_start
    };
    let measured = Measured {
        tally,
        retries,
        elapsed: Duration::from_micros(elapsed),
        started: UNIX_EPOCH + Duration::from_micros(started),
        interrupted,
        failures: Vec::new(),
    };
    Ok((measured, committed_by_process))
}

/// [`Latencies`] on the wire: base64 of the histogram's V2 encoding, a few hundred bytes
/// however many commits a child made.
mod histogram_base64 {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use hdrhistogram::Histogram;
    use hdrhistogram::serialization::{Serializer as _, V2Serializer};
    use serde::{Deserialize, Deserializer, Serializer, de, ser};
    use txretry_lab::stats::Latencies;

    pub fn serialize<S: Serializer>(
        latencies: &Latencies,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(latencies.histogram(), &mut bytes)
            .map_err(|e| ser::Error::custom(format!("latency histogram: {e:?}")))?;
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Latencies, D::Error> {
        let text = String::deserialize(deserializer)?;
        let bytes = STANDARD
            .decode(text)
            .map_err(|e| de::Error::custom(format!("latency histogram: {e}")))?;
        let histogram: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| de::Error::custom(format!("latency histogram: {e:?}")))?;
        Latencies::from_histogram(&histogram)
            .map_err(|e| de::Error::custom(format!("latency histogram: {e:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(
        start: u64,
        elapsed: u64,
        committed: u64,
        latencies: Vec<u64>,
        keys: Vec<i64>,
    ) -> ChildReport {
        let retries = RetryCounter::default();
        retries.record(Some(txretry::TransientKind::SerializationFailure));
        retries.record(None);
        ChildReport {
            policy: "database".into(),
            committed,
            business_failed: 1,
            failed_by_kind: [("serialization_failure".to_owned(), 2)].into(),
            first_errors: [(
                "serialization_failure".to_owned(),
                format!("could not serialize ({committed})"),
            )]
            .into(),
            cut_short: 1,
            attempts: committed + 3,
            retries_by_kind: retries.by_kind(),
            started_unix_us: start,
            elapsed_us: elapsed,
            interrupted: false,
            latencies: latencies.into_iter().collect(),
            committed_keys: keys,
            maybe_committed_keys: Vec::new(),
        }
    }

    #[test]
    fn two_children_merge_into_one_run() {
        let a = report(
            1_000_000,
            5_000_000,
            3,
            vec![1_000, 2_000, 3_000],
            vec![1, 2, 2],
        );
        let mut b = report(1_010_000, 5_000_000, 2, vec![10_000, 4_000], vec![3, 1]);
        b.interrupted = true;
        b.failed_by_kind.insert("permanent".into(), 1);
        let (all, committed_by_process) = aggregate(vec![a, b]).expect("merges");
        let t = &all.tally;
        assert_eq!(t.committed, 5);
        assert_eq!(t.business_failed, 2);
        assert_eq!(t.attempts, 11);
        assert_eq!(t.cut_short, 2);
        assert_eq!(t.failed_by_kind["serialization_failure"], 4);
        assert_eq!(t.failed_by_kind["permanent"], 1);
        // The first child's message of a kind both had.
        assert_eq!(
            t.first_errors["serialization_failure"],
            "could not serialize (3)"
        );
        assert_eq!(t.failed(), 5);
        let by_kind = all.retries.by_kind();
        assert_eq!(by_kind["serialization_failure"], 2);
        assert_eq!(by_kind[txretry_lab::stats::AMBIGUOUS], 2);
        assert_eq!(all.retries.total(), 4);
        assert!(all.interrupted);
        assert_eq!(committed_by_process, vec![3, 2]);
        // From the first start to the last end.
        assert_eq!(all.elapsed, Duration::from_micros(5_010_000));
        assert_eq!(t.committed_keys.len(), 5);
        // Percentiles over every sample together, not the average of each child's.
        let p = txretry_lab::stats::Percentiles::of(&t.latencies);
        assert_eq!(p.p50, Some(3.0));
        assert_eq!(p.max, Some(10.0));
        assert_eq!(p.p95, Some(10.0));
    }

    #[test]
    fn a_stepped_clock_falls_back_to_the_longest_child() {
        let a = report(1_000_000, 2_000_000, 1, vec![1], vec![1]);
        let b = report(900_000_000, 2_500_000, 1, vec![1], vec![1]);
        assert_eq!(
            aggregate(vec![a.clone(), b]).expect("merges").0.elapsed,
            Duration::from_micros(2_500_000)
        );
        assert_eq!(
            aggregate(vec![a]).expect("merges").0.elapsed,
            Duration::from_secs(2)
        );
        assert_eq!(aggregate(Vec::new()).expect("empty").0.tally.committed, 0);
    }

    #[test]
    fn reports_survive_their_json_line() {
        let a = report(1, 2, 3, vec![4, 5, 6], vec![7, 8, 9]);
        let line = serde_json::to_string(&a).expect("serializes");
        assert!(!line.contains('\n'));
        assert_eq!(
            serde_json::from_str::<ChildReport>(&line).expect("parses"),
            a
        );
        let mut bogus = a;
        bogus.retries_by_kind.insert("bogus".into(), 1);
        assert!(aggregate(vec![bogus]).is_err());
    }

    #[test]
    fn latencies_survive_their_json_line_exactly() {
        let a = report(
            1,
            2,
            5,
            vec![1_000, 2_000, 3_000, 10_000, 5_000_000],
            vec![],
        );
        let line = serde_json::to_string(&a).expect("serializes");
        let back: ChildReport = serde_json::from_str(&line).expect("parses");
        assert_eq!(back.latencies, a.latencies);
        let p = txretry_lab::stats::Percentiles::of;
        assert_eq!(p(&back.latencies), p(&a.latencies));
        let value: serde_json::Value = serde_json::from_str(&line).expect("parses");
        for bad in ["not base64!", "AAAA"] {
            let mut value = value.clone();
            value["latencies"] = bad.into();
            assert!(
                serde_json::from_value::<ChildReport>(value).is_err(),
                "{bad}"
            );
        }
    }
}
