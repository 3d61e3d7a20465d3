//! `--fault`: switchovers or kill -9 failovers of a Postgres HA cluster during a run,
//! driven through its script (`docker/ha/cluster`, see docker/README.md), one after the
//! other: the first `--fault-every` after the run starts, each next one `--fault-every`
//! after the previous command returned (the script returns once the old leader has
//! rejoined as a replica). What the script says about each fault (its final line: from,
//! to, when it struck, when the new leader took a write through the proxy) is what the
//! report's timeline compares the application with.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use txretry_lab::cli::Workload;
use txretry_lab::duration::format_duration;
use txretry_lab::events::now_ms;
use txretry_lab::target::Target;

use super::{FaultArg, FaultFlags};

/// `--fault-every` when not given.
pub const DEFAULT_FAULT_EVERY: Duration = Duration::from_secs(10);
/// The shortest `--fault-every`: the application needs a moment on the new primary before
/// the next fault, or no outage is seen to end.
pub const MIN_FAULT_EVERY: Duration = Duration::from_secs(1);
/// The environment variable naming the cluster script (after `--cluster`).
pub const CLUSTER_ENV: &str = "TXRETRY_HA_CLUSTER";
/// The cluster script when neither `--cluster` nor [`CLUSTER_ENV`] names one (relative to
/// the current directory: the repository's root).
pub const DEFAULT_CLUSTER: &str = "docker/ha/cluster";
/// How much of the script's stderr an error quotes.
const STDERR_TAIL: usize = 600;

/// The faults a run injects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultPlan {
    /// Switchover or failover.
    pub kind: FaultArg,
    /// The pause before each fault.
    pub every: Duration,
    /// The cluster script.
    pub cluster: PathBuf,
}

impl FaultPlan {
    /// The plan the flags ask for: `Ok(None)` without `--fault`; an error (a usage error:
    /// the message names the flags) when the flags do not fit together. `cluster_env` is
    /// [`CLUSTER_ENV`]'s value.
    pub fn from_flags(
        cli: &FaultFlags,
        run: &txretry_lab::cli::RunArgs,
        target: &Target,
        cluster_env: Option<PathBuf>,
    ) -> Result<Option<FaultPlan>, String> {
        let Some(kind) = cli.fault else {
            return match (cli.fault_every, &cli.cluster) {
                (Some(_), _) => Err("--fault-every needs --fault switchover|failover".into()),
                (None, Some(_)) => Err("--cluster needs --fault switchover|failover".into()),
                (None, None) => Ok(None),
            };
        };
        if !matches!(target, Target::Postgres(_)) {
            return Err(format!(
                "--fault drives a Postgres HA cluster ({DEFAULT_CLUSTER}): --db must be its proxy URL, e.g. postgres://postgres@127.0.0.1:5440/test (got a {} database)",
                target.engine()
            ));
        }
        if run.workload != Workload::History {
            return Err(
                "--fault needs --workload history: the workload that knows which node each commit landed on and counts lost and doubled commits".into(),
            );
        }
        let every = cli.fault_every.unwrap_or(DEFAULT_FAULT_EVERY);
        if every < MIN_FAULT_EVERY {
            return Err(format!(
                "--fault-every {} is too short: at least {} (the application needs time on the new primary between faults)",
                format_duration(every),
                format_duration(MIN_FAULT_EVERY)
            ));
        }
        if every >= run.duration {
            return Err(format!(
                "--fault-every {} must be shorter than --duration {}: the first fault comes after one interval, so none would run",
                format_duration(every),
                format_duration(run.duration)
            ));
        }
        let cluster = cli
            .cluster
            .clone()
            .or(cluster_env)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CLUSTER));
        if !cluster.is_file() {
            return Err(format!(
                "no cluster script at {}: pass --cluster PATH or set {CLUSTER_ENV} (the default, {DEFAULT_CLUSTER}, is relative to the current directory)",
                cluster.display()
            ));
        }
        Ok(Some(FaultPlan {
            kind,
            every,
            cluster,
        }))
    }
}

/// What the script's final line says about one fault:
/// `<kind> from=pgX to=pgY fault_ms=… writable_ms=… elapsed_ms=… multihost_elapsed_ms=…`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Promotion {
    /// The leader before.
    pub from: String,
    /// The leader after.
    pub to: String,
    /// When the fault struck (unix ms).
    pub fault_ms: u64,
    /// When a write through the proxy first landed on the new leader (unix ms): the
    /// cluster's own promotion time, the limit for any client.
    pub writable_ms: u64,
}

/// Reads the script's final line (the last non-empty line of its stdout).
pub fn parse_promotion(stdout: &str) -> Result<Promotion, String> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or("the cluster script printed nothing")?;
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            .ok_or_else(|| format!("no {name}= in the cluster script's last line {line:?}"))
    };
    let number = |name: &str| {
        field(name)?
            .parse::<u64>()
            .map_err(|_| format!("{name} is not a time in {line:?}"))
    };
    Ok(Promotion {
        from: field("from")?.to_owned(),
        to: field("to")?.to_owned(),
        fault_ms: number("fault_ms")?,
        writable_ms: number("writable_ms")?,
    })
}

/// One fault the run injected.
#[derive(Clone, Debug)]
pub struct Injected {
    /// Switchover or failover.
    pub kind: FaultArg,
    /// When the lab started the script (unix ms).
    pub requested_ms: u64,
    /// When the script returned (unix ms).
    pub returned_ms: u64,
    /// The old leader's port, when the `leader` subcommand named it before the fault.
    pub old_port: Option<i64>,
    /// What the script said, or why it failed.
    pub result: Result<Promotion, String>,
}

/// Runs the script with `args`; its stdout, or why it failed (with the end of its stderr).
async fn script(cluster: &Path, args: &[&str]) -> Result<String, String> {
    // The lab's environment goes along: TXRETRY_HA_STATE and the port settings.
    let out = tokio::process::Command::new(cluster)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .await
        .map_err(|e| format!("could not run {}: {e}", cluster.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        return Ok(stdout);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let start = stderr.len().saturating_sub(STDERR_TAIL);
    let start = (start..stderr.len())
        .find(|&i| stderr.is_char_boundary(i))
        .unwrap_or(stderr.len());
    Err(format!(
        "{} {} failed ({}): {}",
        cluster.display(),
        args.join(" "),
        out.status,
        stderr[start..].trim()
    ))
}

/// The leader's node name and port (`cluster leader`: `pgX PORT`).
pub async fn leader(cluster: &Path) -> Result<(String, i64), String> {
    let text = script(cluster, &["leader"]).await?;
    let mut words = text.split_whitespace();
    match (words.next(), words.next().and_then(|p| p.parse().ok())) {
        (Some(name), Some(port)) => Ok((name.to_owned(), port)),
        _ => Err(format!("unexpected `leader` output {:?}", text.trim())),
    }
}

/// The port of node `name` (`pgN`), given the leader's name and port: the script puts
/// `pgN` on a base port plus N.
pub fn port_of(name: &str, leader: &(String, i64)) -> Option<i64> {
    if name == leader.0 {
        return Some(leader.1);
    }
    let n = |node: &str| node.strip_prefix("pg")?.parse::<i64>().ok();
    Some(leader.1 - n(&leader.0)? + n(name)?)
}

/// Injects one fault: asks the leader, runs the fault, reads the script's final line.
pub async fn inject(plan: &FaultPlan) -> Injected {
    let requested_ms = now_ms();
    let before = leader(&plan.cluster).await;
    let result = match &before {
        Ok(_) => script(&plan.cluster, &[plan.kind.as_str()])
            .await
            .and_then(|out| parse_promotion(&out)),
        Err(e) => Err(e.clone()),
    };
    let old_port = match (&before, &result) {
        (Ok(leader), Ok(p)) => port_of(&p.from, leader),
        (Ok(leader), Err(_)) => Some(leader.1),
        _ => None,
    };
    Injected {
        kind: plan.kind,
        requested_ms,
        returned_ms: now_ms(),
        old_port,
        result,
    }
}

/// Injects faults one after the other until `deadline` (no fault starts after it) or
/// until `stopped()` (Ctrl-C, or the run is over); a fault whose script fails ends the
/// series (it is reported). `in_flight` is set while a fault's command runs: the workers
/// keep going until it returns, so every fault that started is seen to its end.
pub async fn inject_until(
    plan: FaultPlan,
    deadline: Instant,
    stopped: impl Fn() -> bool,
    in_flight: Arc<AtomicBool>,
) -> Vec<Injected> {
    let mut done = Vec::new();
    loop {
        let next = Instant::now() + plan.every;
        while Instant::now() < next {
            if stopped() || Instant::now() >= deadline {
                return done;
            }
            tokio::time::sleep(Duration::from_millis(50).min(next - Instant::now())).await;
        }
        // Set before the last look at the clock: a worker that sees the deadline passed
        // and no fault in flight stops, so it must not miss one that starts now.
        in_flight.store(true, Ordering::SeqCst);
        if stopped() || Instant::now() >= deadline {
            in_flight.store(false, Ordering::SeqCst);
            return done;
        }
        let fault = inject(&plan).await;
        in_flight.store(false, Ordering::SeqCst);
        let failed = fault.result.is_err();
        done.push(fault);
        if failed {
            return done;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use txretry_lab::cli::RunArgs;

    /// The flags of `txretry-bench run` that a fault plan reads.
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
        #[command(flatten)]
        faults: FaultFlags,
    }

    fn plan(args: &[&str]) -> Result<Option<FaultPlan>, String> {
        let cli = Cli::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
            .expect("parses");
        let target = Target::parse(&cli.run.db).expect("a target");
        FaultPlan::from_flags(&cli.faults, &cli.run, &target, None)
    }

    const PG: &str = "postgres://u@127.0.0.1:5440/test";

    #[test]
    fn the_script_line_is_read() {
        let out = "noise\nswitchover from=pg1 to=pg2 fault_ms=1000 writable_ms=3500 elapsed_ms=2500 multihost_elapsed_ms=2600\n\n";
        assert_eq!(
            parse_promotion(out),
            Ok(Promotion {
                from: "pg1".into(),
                to: "pg2".into(),
                fault_ms: 1000,
                writable_ms: 3500,
            })
        );
        assert!(parse_promotion("").is_err());
        assert!(
            parse_promotion("switchover from=pg1 to=pg2 fault_ms=x writable_ms=1")
                .unwrap_err()
                .contains("fault_ms")
        );
        assert!(
            parse_promotion("failover from=pg1 fault_ms=1 writable_ms=2")
                .unwrap_err()
                .contains("to=")
        );
    }

    #[tokio::test]
    async fn no_fault_starts_once_stopped_and_a_failing_script_ends_the_series() {
        let plan = FaultPlan {
            kind: FaultArg::Switchover,
            every: Duration::from_millis(10),
            cluster: PathBuf::from("/nonexistent/cluster"),
        };
        let far = Instant::now() + Duration::from_secs(60);
        let in_flight = Arc::new(AtomicBool::new(false));
        let none = inject_until(plan.clone(), far, || true, in_flight.clone()).await;
        assert!(none.is_empty(), "{none:?}");
        // Not stopped: the first fault runs the script, which fails, and that ends it.
        let one = inject_until(plan, far, || false, in_flight.clone()).await;
        assert_eq!(one.len(), 1, "{one:?}");
        let error = one[0].result.as_ref().expect_err("no such script");
        assert!(error.contains("/nonexistent/cluster"), "{error}");
        assert!(!in_flight.load(Ordering::SeqCst), "nothing left in flight");
    }

    #[test]
    fn node_ports_follow_the_leader() {
        let leader = ("pg2".to_owned(), 5452);
        assert_eq!(port_of("pg2", &leader), Some(5452));
        assert_eq!(port_of("pg1", &leader), Some(5451));
        assert_eq!(port_of("pg3", &leader), Some(5453));
        assert_eq!(port_of("other", &leader), None);
    }

    #[test]
    fn flags_that_do_not_fit_are_refused() {
        let script = format!("{}/../../docker/ha/cluster", env!("CARGO_MANIFEST_DIR"));
        // A valid fault run, plus `extra`.
        let args = |cluster: &str, extra: &[&str]| -> Vec<String> {
            [
                "--db",
                PG,
                "--workload",
                "history",
                "--fault",
                "switchover",
                "--duration",
                "20s",
                "--cluster",
                cluster,
            ]
            .iter()
            .chain(extra)
            .map(|s| (*s).to_owned())
            .collect()
        };
        let plan_of = |args: &[String]| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            plan(&args)
        };
        let p = plan_of(&args(&script, &[]))
            .expect("valid")
            .expect("a plan");
        assert_eq!(p.every, DEFAULT_FAULT_EVERY);
        assert_eq!(p.kind, FaultArg::Switchover);
        assert_eq!(plan(&[]), Ok(None));
        let refused = |args: Vec<String>, says: &str| {
            let err = plan_of(&args).expect_err(&format!("{args:?}"));
            assert!(err.contains(says), "{args:?}: {err}");
        };
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        refused(words(&["--fault-every", "5s"]), "needs --fault");
        refused(words(&["--cluster", "x"]), "needs --fault");
        refused(
            words(&["--fault", "failover", "--workload", "history"]),
            "Postgres",
        );
        refused(
            words(&["--db", PG, "--fault", "failover", "--duration", "20s"]),
            "--workload history",
        );
        refused(args(&script, &["--fault-every", "500ms"]), "too short");
        refused(
            args(&script, &["--fault-every", "30s"]),
            "shorter than --duration",
        );
        refused(args("/nonexistent/cluster", &[]), "no cluster script");
    }
}
