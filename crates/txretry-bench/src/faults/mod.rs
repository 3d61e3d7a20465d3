//! `txretry-bench run --fault`: switchovers or kill -9 failovers of a Postgres HA cluster
//! (`docker/ha/cluster`) during each run of the lab's history workload, and each fault's
//! timeline in the report: `inject.rs` runs the cluster script between faults and reads
//! its final line, `timeline.rs` lines the faults up with the run's timed failures and
//! commits, `text.rs` prints the timelines, and `place.rs` is the [`Place`] that puts it
//! together around the lab's run.
//!
//! [`Place`]: txretry_lab::lab::Place

mod inject;
mod place;
mod text;
mod timeline;

use std::time::Duration;

use clap::{Args, ValueEnum};
use txretry_lab::duration::parse_duration;

pub use inject::{CLUSTER_ENV, FaultPlan};
pub use place::Faulted;

/// The flags of `txretry-bench run` that inject faults.
#[derive(Debug, Args)]
pub struct FaultFlags {
    /// Inject this fault into a Postgres HA cluster (`docker/ha/cluster`) during each run,
    /// every `--fault-every`; `--db` is the cluster's proxy URL and `--workload history`
    /// counts lost and doubled commits. The report adds a timeline per fault.
    #[arg(long, value_enum, value_name = "KIND")]
    pub fault: Option<FaultArg>,

    /// With `--fault`: the first fault after this long, each next one this long after the
    /// previous fault's command returned (the old leader rejoined) [default: 10s].
    #[arg(long, value_name = "TIME", value_parser = parse_duration, allow_hyphen_values = true)]
    pub fault_every: Option<Duration>,

    /// With `--fault`: the cluster script [default: $TXRETRY_HA_CLUSTER, else
    /// docker/ha/cluster in the current directory]. It gets the lab's environment, so
    /// TXRETRY_HA_STATE and the TXRETRY_HA_*_PORT settings reach it.
    #[arg(long, value_name = "PATH")]
    pub cluster: Option<std::path::PathBuf>,
}

/// `--fault` values: what `docker/ha/cluster` does to the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FaultArg {
    /// A planned switchover (`cluster switchover`): Patroni hands the leader role over.
    Switchover,
    /// A crash of the leader's node (`cluster failover`: kill -9 of its Patroni and
    /// PostgreSQL); a replica is promoted once the leader key expires.
    Failover,
}

impl FaultArg {
    /// The flag's value, which is also the script's subcommand.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultArg::Switchover => "switchover",
            FaultArg::Failover => "failover",
        }
    }
}
