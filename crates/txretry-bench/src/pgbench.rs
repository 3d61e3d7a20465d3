//! The sweep's pgbench row: Postgres's own benchmark client runs the hot-rows
//! transaction (read a random row, add one to it) with `--max-tries=1000`, side by side
//! with the presets.
//!
//! The table is the lab's own (`Schema`), created fresh for each run. The database URL goes
//! to pgbench in `PGDATABASE` (pgbench expands a URI there), never on its command line.
//! pgbench's summary gives the counts; its per-transaction log (`-l`) the latencies, for
//! the same nearest-rank percentiles as the lab's runs; the counters' sum afterwards must
//! equal the transactions pgbench says it committed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use sqlx::postgres::Postgres;
use sqlx::{AssertSqlSafe, Row};
use tokio::process::Command;
use txretry::TransientKind;

use crate::cell::Sample;
use txretry_lab::backend;
use txretry_lab::cli::{IsolationArg, Workload};
use txretry_lab::stats::{Percentiles, ratio};
use txretry_lab::workload::Schema;

/// pgbench's tries per transaction: as good as "until it commits".
pub const MAX_TRIES: u32 = 1000;

/// Why a sweep has no pgbench row, or `None` when it has one.
pub fn skipped_because(postgres: bool, workload: Workload, on_path: bool) -> Option<&'static str> {
    if !postgres {
        Some("pgbench row skipped: the database is not Postgres")
    } else if workload != Workload::HotRows {
        Some("pgbench row skipped: it runs the hot-rows transaction only (--workload hot-rows)")
    } else if !on_path {
        Some(
            "pgbench row skipped: pgbench is not on PATH (Debian: apt-get install postgresql-client)",
        )
    } else {
        None
    }
}

/// Whether a `pgbench` runs here.
pub async fn on_path() -> bool {
    Command::new("pgbench")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|status| status.success())
}

/// pgbench runs whole seconds: the run time it gets for a run of `duration` (at least 1 s).
pub fn seconds(duration: Duration) -> u64 {
    duration.as_secs_f64().ceil().max(1.0) as u64
}

/// The transaction, in pgbench's script language, on `table` (a name the lab made).
pub fn script(table: &str, rows: u32, isolation: IsolationArg) -> String {
    let level = match isolation {
        IsolationArg::ReadCommitted => "READ COMMITTED",
        IsolationArg::RepeatableRead => "REPEATABLE READ",
        IsolationArg::Serializable => "SERIALIZABLE",
    };
    format!(
        "\\set id random(1, {rows})\n\
         BEGIN ISOLATION LEVEL {level};\n\
         SELECT counter FROM {table} WHERE id = :id;\n\
         UPDATE {table} SET counter = counter + 1 WHERE id = :id;\n\
         END;\n"
    )
}

/// What pgbench's summary on stdout says.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// "number of transactions actually processed": the ones that committed.
    pub committed: u64,
    /// "number of failed transactions" (0 from a pgbench older than 15, which stops instead).
    pub failed: u64,
    /// Failed transactions by kind, named as the lab names them.
    pub failed_by_kind: BTreeMap<String, u64>,
    /// "total number of retries" (absent, so 0, with `--max-tries=1`).
    pub retries: u64,
    /// "tps = …": committed transactions per second, connection time excluded.
    pub tps: f64,
}

/// The number after `label` on its line of `out`.
fn number_after<T: std::str::FromStr>(out: &str, label: &str) -> Option<T> {
    out.lines().find_map(|line| {
        let rest = line.trim().strip_prefix(label)?.trim_start();
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        rest[..end].parse().ok()
    })
}

/// Reads pgbench's summary (its stdout).
pub fn parse_summary(out: &str) -> Result<Summary, String> {
    let committed = number_after(out, "number of transactions actually processed:")
        .ok_or("pgbench printed no \"number of transactions actually processed\"")?;
    let tps = number_after(out, "tps =").ok_or("pgbench printed no \"tps =\"")?;
    let mut failed_by_kind = BTreeMap::new();
    for (label, kind) in [
        (
            "number of serialization failures:",
            TransientKind::SerializationFailure,
        ),
        ("number of deadlock failures:", TransientKind::Deadlock),
    ] {
        if let Some(n) = number_after::<u64>(out, label).filter(|&n| n > 0) {
            failed_by_kind.insert(kind.as_str().to_owned(), n);
        }
    }
    Ok(Summary {
        committed,
        failed: number_after(out, "number of failed transactions:").unwrap_or(0),
        failed_by_kind,
        retries: number_after(out, "total number of retries:").unwrap_or(0),
        tps,
    })
}

/// The latencies (microseconds) of the committed transactions in a pgbench
/// per-transaction log: `client transaction time script epoch epoch_us [retries]`, where
/// `time` is a failed transaction's failure (`failed`, `serialization`, `deadlock`) or a
/// skipped one's `skipped` instead of a number.
pub fn parse_log(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|line| line.split_whitespace().nth(2)?.parse().ok())
        .collect()
}

/// One pgbench run: where, how many clients, how long.
#[derive(Clone, Debug)]
pub struct Bench {
    /// The Postgres URL (it may hold a password: for connecting only).
    pub url: String,
    /// Hot rows.
    pub rows: u32,
    /// The isolation every transaction begins with.
    pub isolation: IsolationArg,
    /// The run time (whole seconds, see [`seconds`]).
    pub seconds: u64,
}

impl Bench {
    /// Runs pgbench with `clients` clients on fresh tables and reports it as a sample.
    /// Errors say what went wrong (not yet scrubbed of the password).
    pub async fn run(&self, clients: usize) -> Result<Sample, String> {
        let pool = backend::postgres(&self.url, 1, backend::ACQUIRE_TIMEOUT)
            .await
            .map_err(|e| format!("could not connect for pgbench: {e}"))?;
        let schema = Schema::new::<Postgres>(Workload::HotRows, self.rows);
        let result = match schema.create(&pool).await {
            Ok(()) => self.measure(&pool, &schema, clients).await,
            Err(e) => Err(format!("could not set up pgbench's table: {e}")),
        };
        // Best effort, as for the lab's runs: a table left behind harms nothing.
        let _ = schema.drop_tables(&pool).await;
        pool.close().await;
        result
    }

    async fn measure(
        &self,
        pool: &sqlx::Pool<Postgres>,
        schema: &Schema,
        clients: usize,
    ) -> Result<Sample, String> {
        let dir = tempfile::Builder::new()
            .prefix("txretry-lab-pgbench-")
            .tempdir()
            .map_err(|e| format!("could not create a temp dir for pgbench: {e}"))?;
        let script_path = dir.path().join("hot-rows.sql");
        std::fs::write(
            &script_path,
            script(schema.hot_table(), self.rows, self.isolation),
        )
        .map_err(|e| format!("could not write pgbench's script: {e}"))?;
        let log_prefix = dir.path().join("log");
        let threads = clients.min(std::thread::available_parallelism().map_or(1, |n| n.get()));
        let output = Command::new("pgbench")
            .args(["-n", "-M", "prepared", "--failures-detailed"])
            .arg(format!("--max-tries={MAX_TRIES}"))
            .args(["-c", &clients.to_string(), "-j", &threads.to_string()])
            .args(["-T", &self.seconds.to_string()])
            .arg("-f")
            .arg(&script_path)
            .arg("-l")
            .arg(format!("--log-prefix={}", log_prefix.display()))
            .env("PGDATABASE", &self.url)
            .env("PGAPPNAME", "txretry-lab-pgbench")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("could not start pgbench: {e}"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let first = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!("pgbench failed ({}): {first}", output.status));
        }
        let summary = parse_summary(&stdout)?;
        let latency = Percentiles::of(&read_logs(dir.path())?.into_iter().collect());
        // The table name is the lab's own (`txlab_<pid>_<run>_hot`), never user input.
        let sum_query = format!(
            "SELECT COALESCE(SUM(counter), 0)::BIGINT FROM {}",
            schema.hot_table()
        );
        let sum: i64 = sqlx::query(AssertSqlSafe(sum_query))
            .fetch_one(pool)
            .await
            .and_then(|row| row.try_get(0usize))
            .map_err(|e| format!("could not check pgbench's table: {e}"))?;
        let invariant_ok = u64::try_from(sum) == Ok(summary.committed);
        Ok(Sample {
            goodput: summary.tps,
            committed: summary.committed,
            failed: summary.failed,
            failed_by_kind: summary.failed_by_kind,
            business_failed: 0,
            retries: summary.retries,
            retries_per_commit: ratio(summary.retries, summary.committed),
            p50_ms: latency.p50,
            p99_ms: latency.p99,
            invariant_ok,
            invariant: format!(
                "the counters add up to {sum}; pgbench committed {}",
                summary.committed
            ),
            interrupted: false,
        })
    }
}

/// Every latency in the per-transaction logs in `dir` (one file per pgbench thread).
fn read_logs(dir: &Path) -> Result<Vec<u64>, String> {
    let unreadable = |e: std::io::Error| format!("could not read pgbench's log: {e}");
    let mut latencies = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("log."))
        {
            latencies.extend(parse_log(
                &std::fs::read_to_string(&path).map_err(unreadable)?,
            ));
        }
    }
    Ok(latencies)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from pgbench 15.20 on this project's Postgres: 8 clients, 2 threads, the
    // script of `script()` on 4 rows under REPEATABLE READ.
    const RETRIED: &str = include_str!("testdata/pgbench-8-clients-max-tries-1000.txt");
    const FAILED: &str = include_str!("testdata/pgbench-8-clients-max-tries-1.txt");
    const LOG_RETRIED: &str = include_str!("testdata/pgbench-log-max-tries-1000.txt");
    const LOG_FAILED: &str = include_str!("testdata/pgbench-log-max-tries-1.txt");

    #[test]
    fn summary_with_retries() {
        let s = parse_summary(RETRIED).expect("parses");
        assert_eq!(s.committed, 1641);
        assert_eq!(s.failed, 0);
        assert!(s.failed_by_kind.is_empty());
        assert_eq!(s.retries, 2042);
        assert_eq!(s.tps, 847.066985);
    }

    #[test]
    fn summary_with_failures_and_no_retries() {
        let s = parse_summary(FAILED).expect("parses");
        assert_eq!(s.committed, 721);
        assert_eq!(s.failed, 906);
        assert_eq!(s.failed_by_kind["serialization_failure"], 906);
        assert!(!s.failed_by_kind.contains_key("deadlock"));
        assert_eq!(s.retries, 0);
        assert_eq!(s.tps, 755.483279);
    }

    #[test]
    fn a_summary_without_counts_is_an_error() {
        assert!(parse_summary("").is_err());
        let no_tps: String = RETRIED
            .lines()
            .filter(|l| !l.starts_with("tps"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(parse_summary(&no_tps).unwrap_err().contains("tps"));
    }

    #[test]
    fn logs_keep_the_committed_latencies_only() {
        assert_eq!(
            parse_log(LOG_RETRIED),
            vec![20501, 15954, 21540, 14097, 9151, 13293, 8871, 9514]
        );
        // Three committed, three serialization failures.
        assert_eq!(parse_log(LOG_FAILED), vec![11866, 13499, 15868]);
        assert_eq!(parse_log("\n0 1 skipped 0 1 2\n"), Vec::<u64>::new());
    }

    #[test]
    fn the_script_is_the_hot_rows_transaction() {
        let s = script("txlab_1_0_hot", 4, IsolationArg::RepeatableRead);
        assert!(s.starts_with("\\set id random(1, 4)\n"), "{s}");
        assert!(s.contains("BEGIN ISOLATION LEVEL REPEATABLE READ;"), "{s}");
        assert!(s.contains("UPDATE txlab_1_0_hot SET counter = counter + 1 WHERE id = :id;"));
        assert!(s.ends_with("END;\n"));
    }

    #[test]
    fn whole_seconds_and_reasons() {
        assert_eq!(seconds(Duration::from_millis(200)), 1);
        assert_eq!(seconds(Duration::from_millis(2500)), 3);
        assert_eq!(seconds(Duration::from_secs(10)), 10);
        assert_eq!(skipped_because(true, Workload::HotRows, true), None);
        assert!(
            skipped_because(false, Workload::HotRows, true)
                .is_some_and(|r| r.contains("not Postgres"))
        );
        assert!(
            skipped_because(true, Workload::Transfer, true).is_some_and(|r| r.contains("hot-rows"))
        );
        assert!(
            skipped_because(true, Workload::HotRows, false).is_some_and(|r| r.contains("PATH"))
        );
    }
}
