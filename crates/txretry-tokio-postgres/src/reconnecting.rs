//! A client that connects again when its connection is lost: what a runner needs to ride
//! out a switchover or a failover, where every session of the old primary ends.

use std::error::Error as _;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_postgres::error::DbError;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Socket, Transaction};
use txretry_core::{
    AsError, AttemptFailure, Code, Phase, RetryPolicy, TransientKind, TxError, TxFailure,
    TxOptions, Verdict,
};

use crate::{Source, extract};

/// A tokio-postgres client that the runner replaces when its connection breaks: the
/// answer for a primary behind a failover manager (Patroni, a managed service's HA).
///
/// It holds a [`Config`] and connects lazily, on the first transaction and again after
/// any failure that lost the session (a terminated backend, a shutdown, a write that
/// reached a standby). With a multi-host config and
/// `target_session_attrs=read-write`, tokio-postgres tries the hosts in order and skips
/// the ones that do not accept writes, so the next attempt lands on the new primary. Set
/// `connect_timeout`: it bounds each host's whole attempt (TCP, TLS, startup, the
/// read-write check), as in libpq, so a frozen host is given up and the next one tried
/// (tokio-postgres's own `connect` bounds only the TCP connect). The connection's
/// background task is spawned on the current tokio runtime.
///
/// Under a policy with a failover budget ([`RetryPolicy::high_availability`]) its
/// [`transaction`](Reconnecting::transaction) rides out the outage: attempts that fail
/// before COMMIT (the server rolled them back) run again on a new connection until one
/// commits or the budget runs out; a COMMIT whose answer was lost is
/// [`Ambiguous`](Verdict::Ambiguous) and never run again unless the call is idempotent.
///
/// ```no_run
/// use txretry_core::{RetryPolicy, TxError};
/// use txretry_tokio_postgres::Reconnecting;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let config = "postgres://app@10.0.0.1:5432,10.0.0.2:5432,10.0.0.3:5432/shop\
///               ?target_session_attrs=read-write&connect_timeout=2"
///     .parse()?;
/// let mut db = Reconnecting::new(config);
/// let policy = RetryPolicy::high_availability();
/// db.transaction(&policy, async |tx| {
///     tx.execute("UPDATE stock SET n = n - 1 WHERE sku = $1", &[&"A-17"]).await
/// })
/// .await
/// .map_err(TxError::into_error)?;
/// # Ok(())
/// # }
/// ```
///
/// A connection failure while connecting (refused, reset, every host read-only) is
/// [`TransientKind::Connection`]: nothing ran. A server's own refusal keeps its code
/// (`57P03` while a node starts is [`TransientKind::Failover`]; a wrong password is
/// permanent).
///
/// # A commit that was not replicated
/// Under synchronous replication a COMMIT waits for the standby. When that wait is
/// cancelled (`pg_cancel_backend`, a client's cancel request; not `statement_timeout`,
/// which Postgres disarms at COMMIT), Postgres answers the COMMIT with
/// success and a warning: "The transaction has already committed locally, but might not
/// have been replicated to the standby." A failover before the standby catches up would
/// lose it. `Reconnecting` owns its connection's task, so it sees that warning:
/// [`unreplicated_commit`](Reconnecting::unreplicated_commit) says so after the
/// transaction returned `Ok`, and a `tracing` warning is logged. (A plain `Client`'s
/// notices go to whoever polls its connection; sqlx only logs them.)
pub struct Reconnecting<T = NoTls> {
    config: Config,
    tls: T,
    client: Option<Client>,
    /// What the connection's task saw of the current transaction's COMMIT.
    warning: Arc<Mutex<Option<UnreplicatedCommit>>>,
    /// The last committed transaction's, if its COMMIT was not confirmed replicated.
    unreplicated: Option<UnreplicatedCommit>,
    /// An attempt has the client and has not ended: set while it runs, so that one whose
    /// future was dropped midway (a call deadline) leaves it set.
    in_flight: bool,
}

/// A COMMIT that succeeded on the primary with the server's warning that it might not have
/// been replicated to the synchronous standby (its wait was cancelled).
///
/// Postgres has no SQLSTATE of its own for this (the warning is `01000`): it is recognised
/// by the server's DETAIL text, "might not have been replicated", as Postgres prints it in
/// English (`lc_messages` `C` or `en`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnreplicatedCommit {
    /// The warning's message, e.g. "canceling wait for synchronous replication due to
    /// user request".
    pub message: String,
    /// Its detail: "The transaction has already committed locally, but might not have been
    /// replicated to the standby."
    pub detail: String,
}

impl UnreplicatedCommit {
    /// The warning, if `notice` is Postgres' "committed locally, not replicated" one.
    fn from_notice(notice: &DbError) -> Option<Self> {
        let detail = notice.detail()?;
        detail
            .contains("might not have been replicated")
            .then(|| UnreplicatedCommit {
                message: notice.message().to_owned(),
                detail: detail.to_owned(),
            })
    }
}

impl Reconnecting<NoTls> {
    /// A reconnecting client without TLS. Nothing is connected yet.
    pub fn new(config: Config) -> Self {
        Reconnecting::with_tls(config, NoTls)
    }
}

impl<T> Reconnecting<T>
where
    T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    /// A reconnecting client that connects with `tls`. Nothing is connected yet.
    pub fn with_tls(config: Config, tls: T) -> Self {
        Reconnecting {
            config,
            tls,
            client: None,
            warning: Arc::default(),
            unreplicated: None,
            in_flight: false,
        }
    }

    /// The connected client, connecting first when there is none or it was closed.
    pub async fn client(&mut self) -> Result<&mut Client, tokio_postgres::Error> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            // Host by host, each bounded by `connect_timeout` as a whole (see `hosts`).
            let (client, mut connection) = crate::hosts::connect(&self.config, &self.tls).await?;
            let warning = Arc::clone(&self.warning);
            tokio::spawn(async move {
                // Drives the connection, keeping the one notice that matters; ends when
                // the connection does (its error is the next query's).
                while let Some(Ok(message)) =
                    std::future::poll_fn(|cx| connection.poll_message(cx)).await
                {
                    if let AsyncMessage::Notice(notice) = message
                        && let Some(unreplicated) = UnreplicatedCommit::from_notice(&notice)
                    {
                        tracing::warn!(
                            message = %unreplicated.message,
                            detail = %unreplicated.detail,
                            "txretry: a COMMIT succeeded but was not confirmed replicated"
                        );
                        *warning.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some(unreplicated);
                    }
                }
            });
            self.client = Some(client);
        }
        Ok(self
            .client
            .as_mut()
            .unwrap_or_else(|| unreachable!("connected above")))
    }

    /// Drops the current connection (if any); the next use connects again.
    pub fn disconnect(&mut self) {
        self.client = None;
    }

    /// Whether the last transaction that returned `Ok` committed on the primary without
    /// the synchronous standby's confirmation (see [`UnreplicatedCommit`]): durable only
    /// once the standby catches up, lost if the primary fails over before that. `None`
    /// when its COMMIT was confirmed (or no synchronous standby was asked for).
    pub fn unreplicated_commit(&self) -> Option<&UnreplicatedCommit> {
        self.unreplicated.as_ref()
    }

    /// Whether a connection is open now.
    pub fn is_connected(&self) -> bool {
        self.client.as_ref().is_some_and(|c| !c.is_closed())
    }

    /// The configuration it connects with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// [`crate::transaction`] on this client, connecting again whenever a failure lost the
    /// connection, so that a retry runs on a new session (with a multi-host config: on
    /// the current primary).
    pub async fn transaction<R, E, Via, F>(
        &mut self,
        policy: &RetryPolicy,
        f: F,
    ) -> Result<R, TxError<E>>
    where
        F: AsyncFnMut(&mut Transaction<'_>) -> Result<R, E>,
        E: From<tokio_postgres::Error> + AsError<Via>,
    {
        crate::run(self, policy.clone(), TxOptions::default(), f).await
    }

    /// [`crate::transaction_with`] on this client, connecting again whenever a failure
    /// lost the connection.
    pub async fn transaction_with<R, E, Via, F>(
        &mut self,
        policy: &RetryPolicy,
        options: &TxOptions,
        f: F,
    ) -> Result<R, TxError<E>>
    where
        F: AsyncFnMut(&mut Transaction<'_>) -> Result<R, E>,
        E: From<tokio_postgres::Error> + AsError<Via>,
    {
        crate::run(self, policy.clone(), options.clone(), f).await
    }
}

impl<T> Source for &mut Reconnecting<T>
where
    T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
    T::Stream: Send + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
{
    async fn client_for_attempt(&mut self) -> Result<&mut Client, tokio_postgres::Error> {
        self.unreplicated = None;
        *self.warning.lock().unwrap_or_else(PoisonError::into_inner) = None;
        if std::mem::take(&mut self.in_flight) {
            // The last attempt's future was dropped midway (a call deadline): its statement
            // may still await an answer on this connection (a frozen primary never sends
            // one), and every later query would queue behind it. Start on a new one.
            self.client = None;
        }
        self.client().await?;
        // Set only once connected: a connect dropped midway left nothing behind.
        self.in_flight = true;
        Ok(self
            .client
            .as_mut()
            .unwrap_or_else(|| unreachable!("connected above")))
    }

    fn ended(&mut self) {
        self.in_flight = false;
    }

    fn committed(&mut self) {
        self.unreplicated = self
            .warning
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    fn lost<E>(&mut self, failure: TxFailure<E>) -> TxFailure<E> {
        self.client = None;
        failure
    }
}

/// A failed connect. Nothing ran, so a server that could not be reached (refused, reset,
/// timed out, closed, "database does not allow writes" from `target_session_attrs`) is a
/// connection failure, safe to retry; a server's answer (`57P03` starting up, a wrong
/// password) keeps its verdict, and so does a failure no retry mends ([`unmendable`]).
pub(crate) fn connect_failed<E, Via>(
    policy: &RetryPolicy,
    error: tokio_postgres::Error,
) -> TxFailure<E>
where
    E: From<tokio_postgres::Error> + AsError<Via>,
{
    if error.code().is_some() || unmendable(&error) {
        return TxFailure::in_body(policy, extract, E::from(error));
    }
    TxFailure::judged_as(
        E::from(error),
        AttemptFailure::new(
            Verdict::Transient(TransientKind::Connection),
            Some(Code::Driver("connect")),
            Phase::Body,
        ),
    )
}

/// A connect that failed for a reason of its own, not for want of a server: a TLS
/// certificate that fails its check, TLS the server does not offer, a configuration or an
/// authentication the client cannot make. The first I/O error in its causes decides
/// ([`io_unmendable`](txretry_core::io_unmendable); a reset during the handshake stays a
/// connection failure); without one, a cause of another type (a TLS library's, a message)
/// does. Retried, such a connect failed the same way until the failover budget ran out.
fn unmendable(error: &tokio_postgres::Error) -> bool {
    match txretry_core::io_cause(error) {
        Some(io) => txretry_core::io_unmendable(io),
        // A timeout or a closed connection has no cause.
        None => error.source().is_some(),
    }
}

impl<T> fmt::Debug for Reconnecting<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reconnecting")
            .field("config", &self.config)
            .field(
                "connected",
                &self.client.as_ref().is_some_and(|c| !c.is_closed()),
            )
            .finish_non_exhaustive()
    }
}
