//! How long a sweep will take, said before it starts (and as it goes): the runs' own time
//! plus a rough allowance for what surrounds each run.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Around each lab run: a fresh pool, creating, checking and dropping the tables, and the
/// transactions in flight when the time is up (a rough figure from this project's VM).
pub const LAB_OVERHEAD: Duration = Duration::from_millis(300);
/// Around each pgbench run: starting it, its connections, the table.
pub const PGBENCH_OVERHEAD: Duration = Duration::from_millis(600);

/// The time `lab_runs` runs of `run` each and `pgbench_runs` pgbench runs of
/// `pgbench_seconds` each take, allowances included.
pub fn total(
    lab_runs: usize,
    run: Duration,
    pgbench_runs: usize,
    pgbench_seconds: u64,
) -> Duration {
    let lab = (run + LAB_OVERHEAD).saturating_mul(u32::try_from(lab_runs).unwrap_or(u32::MAX));
    let pgbench = (Duration::from_secs(pgbench_seconds) + PGBENCH_OVERHEAD)
        .saturating_mul(u32::try_from(pgbench_runs).unwrap_or(u32::MAX));
    lab.saturating_add(pgbench)
}

/// A duration to the second, the way a person says it: `45s`, `3m 05s`, `1h 20m`.
pub fn approx(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
    }
}

/// The UTC time of day `d` after `now`, as `HH:MM UTC`.
pub fn clock_after(now: SystemTime, d: Duration) -> String {
    let at = now.checked_add(d).unwrap_or(now);
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |t| t.as_secs());
    let of_day = secs % 86_400;
    format!("{:02}:{:02} UTC", of_day / 3600, of_day % 3600 / 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_count_every_run_and_its_allowance() {
        let t = total(10, Duration::from_secs(2), 2, 3);
        assert_eq!(
            t,
            Duration::from_secs(26) + LAB_OVERHEAD * 10 + PGBENCH_OVERHEAD * 2
        );
        assert_eq!(total(0, Duration::from_secs(5), 0, 5), Duration::ZERO);
    }

    #[test]
    fn durations_read_like_speech() {
        assert_eq!(approx(Duration::from_millis(44_600)), "45s");
        assert_eq!(approx(Duration::from_secs(185)), "3m 05s");
        assert_eq!(approx(Duration::from_secs(4800)), "1h 20m");
    }

    #[test]
    fn clock_times_are_utc() {
        let noon = UNIX_EPOCH + Duration::from_secs(86_400 * 3 + 12 * 3600);
        assert_eq!(clock_after(noon, Duration::from_secs(90 * 60)), "13:30 UTC");
        assert_eq!(
            clock_after(noon, Duration::from_secs(13 * 3600)),
            "01:00 UTC"
        );
    }
}
