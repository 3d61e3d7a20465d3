//! The search for the primary: every host connected to and asked at once whether it
//! accepts writes, and why a host was passed over.

use std::fmt;
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::task::JoinSet;
use txretry_core::Verdict;

use super::NotPrimary;

/// How long one check, or one connect while searching, may take.
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The first host to answer that it accepts writes, with that connection; else why each
/// host was passed over, in the order of `hosts`.
///
/// The hosts are asked at once, not in turn: in a failover the old primary is often the
/// first listed, and when its machine froze it holds a probe for all of
/// [`PROBE_TIMEOUT`], which asked in turn delayed finding the new primary every round.
/// The other probes are dropped as soon as one host answers.
pub(super) async fn search(
    hosts: &[PgConnectOptions],
) -> Result<(usize, PgConnection), Vec<PassedOver>> {
    let mut probes = JoinSet::new();
    for (i, host) in hosts.iter().enumerate() {
        let host = host.clone();
        probes.spawn(async move { (i, probe(&host).await) });
    }
    let mut passed: Vec<Option<PassedOver>> = hosts.iter().map(|_| None).collect();
    while let Some(joined) = probes.join_next().await {
        match joined {
            // Dropping `probes` aborts the probes still running.
            Ok((i, Ok(conn))) => return Ok((i, conn)),
            Ok((i, Err(why))) => passed[i] = Some(why),
            // A probe that panicked (a bug, never the server's answer): no answer.
            Err(_) => {}
        }
    }
    Err(passed
        .into_iter()
        .map(|why| why.unwrap_or(PassedOver::NoAnswer))
        .collect())
}

/// A connection to `host` if it accepts writes; else why not.
async fn probe(host: &PgConnectOptions) -> Result<PgConnection, PassedOver> {
    let mut conn = match tokio::time::timeout(PROBE_TIMEOUT, host.connect()).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return Err(PassedOver::Failed(e)),
        Err(_) => return Err(PassedOver::NoAnswer),
    };
    match tokio::time::timeout(PROBE_TIMEOUT, read_only(&mut conn)).await {
        Ok(Ok(false)) => Ok(conn),
        Ok(Ok(true)) => Err(PassedOver::ReadOnly),
        Ok(Err(e)) => Err(PassedOver::Failed(e)),
        Err(_) => Err(PassedOver::NoAnswer),
    }
}

/// Why a search passed a host over.
#[derive(Debug)]
pub(super) enum PassedOver {
    /// Connecting, or asking whether it accepts writes, failed.
    Failed(sqlx::Error),
    /// No answer within [`PROBE_TIMEOUT`].
    NoAnswer,
    /// It answered that it does not accept writes (a standby).
    ReadOnly,
}

impl PassedOver {
    /// Whether waiting cannot help: the host refused with an error txretry's default table
    /// calls permanent (a wrong password, a missing database), not an outage.
    pub(super) fn is_permanent(&self) -> bool {
        match self {
            PassedOver::Failed(e) => txretry_core::classify(e).verdict == Verdict::Permanent,
            PassedOver::NoAnswer | PassedOver::ReadOnly => false,
        }
    }
}

impl fmt::Display for PassedOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassedOver::Failed(e @ sqlx::Error::Database(_)) => {
                write!(f, "refused: {}", crate::describe::describe(e))
            }
            PassedOver::Failed(e) => write!(f, "failed: {e}"),
            PassedOver::NoAnswer => write!(f, "did not answer within {}s", PROBE_TIMEOUT.as_secs()),
            PassedOver::ReadOnly => f.write_str("does not accept writes (a standby)"),
        }
    }
}

/// Whether the session is read-only, as libpq's `target_session_attrs=read-write` asks.
pub(super) async fn read_only(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let value: String = sqlx::query_scalar("SHOW transaction_read_only")
        .fetch_one(conn)
        .await?;
    Ok(value == "on")
}

/// The pool's `after_connect`: a new connection on a read-only host is refused.
pub(super) async fn refuse_read_only(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    if read_only(conn).await? {
        return Err(sqlx::Error::Database(Box::new(NotPrimary)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn why_a_host_was_passed_over_says_whether_waiting_can_help() {
        let refused = PassedOver::Failed(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert!(!refused.is_permanent());
        assert!(refused.to_string().starts_with("failed: "), "{refused}");
        // A host whose machine is gone: waiting for the failover helps.
        let gone = PassedOver::Failed(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::HostUnreachable,
        )));
        assert!(!gone.is_permanent());
        assert!(!PassedOver::ReadOnly.is_permanent());
        assert!(!PassedOver::NoAnswer.is_permanent());
        let config = PassedOver::Failed(sqlx::Error::Configuration("bad sslmode".into()));
        assert!(config.is_permanent());
    }
}
