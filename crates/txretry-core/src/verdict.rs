//! What a failed attempt means: the three-way verdict and the code that decided it.

use std::fmt;

/// Whether running the whole transaction again is safe.
///
/// The split is three-way on purpose: a retry loop that only knows "retry" and "don't"
/// ends up retrying a COMMIT that may have landed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Nothing of the attempt will be committed, so running the whole transaction again is
    /// safe: the server rolled the transaction back (deadlock, serialization failure), or
    /// only the failing statement (MySQL lock-wait timeout 1205, `SQLITE_BUSY` in the
    /// middle of a transaction) and the runner rolls back the rest before it retries.
    Transient(TransientKind),
    /// The commit may or may not have happened. Never retried unless the operation is
    /// declared idempotent ([`TxOptions::idempotent`](crate::TxOptions::idempotent)).
    Ambiguous,
    /// A real outcome ("order not found", a constraint): it surfaces exactly once.
    Permanent,
}

impl Verdict {
    /// The transient kind, if this verdict is transient.
    pub fn kind(self) -> Option<TransientKind> {
        match self {
            Verdict::Transient(kind) => Some(kind),
            _ => None,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Transient(kind) => write!(f, "transient ({kind})"),
            Verdict::Ambiguous => f.write_str("ambiguous"),
            Verdict::Permanent => f.write_str("permanent"),
        }
    }
}

/// Why a transient failure happened.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransientKind {
    /// The server picked this transaction as a deadlock victim (Postgres 40P01, MySQL 1213).
    Deadlock,
    /// A lock could not be taken in time (Postgres 55P03, MySQL 1205).
    LockTimeout,
    /// A concurrent transaction made this one unserializable (Postgres 40001).
    SerializationFailure,
    /// SQLite could not get the lock it needed (SQLITE_BUSY and its extended codes).
    Busy,
    /// SQLite table-level lock conflict within one connection or shared cache (SQLITE_LOCKED).
    /// Recognised, retried only when opted in.
    Locked,
    /// The connection failed or could not be had. Recognised, retried only when opted in,
    /// and never after COMMIT was sent.
    Connection,
    /// The server is going away, coming back, or is not the primary: Postgres 57P01
    /// (`admin_shutdown`: a fast shutdown, a switchover, `pg_terminate_backend`), 57P02
    /// (`crash_shutdown`), 57P03 (`cannot_connect_now`: starting up, shutting down, in
    /// recovery) and 25006 (`read_only_sql_transaction`: a write reached a standby or a
    /// demoted primary). Before COMMIT the server rolled the attempt back; the connection
    /// is discarded and the next attempt runs on a new one. Retried only under a failover
    /// budget ([`RetryPolicyBuilder::failover`](crate::RetryPolicyBuilder::failover)), and
    /// never after COMMIT was sent. A 25006 in a transaction the caller asked to be
    /// read-only is a programming error: permanent.
    Failover,
}

impl TransientKind {
    /// Every kind, in declaration order.
    pub const ALL: [TransientKind; 7] = [
        TransientKind::Deadlock,
        TransientKind::LockTimeout,
        TransientKind::SerializationFailure,
        TransientKind::Busy,
        TransientKind::Locked,
        TransientKind::Connection,
        TransientKind::Failover,
    ];

    /// A short stable name, used in events and metrics: `deadlock`, `lock_timeout`, …
    pub fn as_str(self) -> &'static str {
        match self {
            TransientKind::Deadlock => "deadlock",
            TransientKind::LockTimeout => "lock_timeout",
            TransientKind::SerializationFailure => "serialization_failure",
            TransientKind::Busy => "busy",
            TransientKind::Locked => "locked",
            TransientKind::Connection => "connection",
            TransientKind::Failover => "failover",
        }
    }

    /// Whether the session the failure came from is gone or on the wrong server
    /// ([`Connection`](TransientKind::Connection), [`Failover`](TransientKind::Failover)):
    /// the connection must be discarded, and at COMMIT such a failure proves nothing about
    /// whether the commit landed.
    pub fn loses_session(self) -> bool {
        matches!(self, TransientKind::Connection | TransientKind::Failover)
    }

    pub(crate) fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for TransientKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of [`TransientKind`]s, as used by [`RetryPolicyBuilder::retry_on`](crate::RetryPolicyBuilder::retry_on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct KindSet(u8);

impl KindSet {
    /// No kind.
    pub const EMPTY: KindSet = KindSet(0);

    /// The kinds `RetryPolicy::default()` retries: deadlock, lock timeout, serialization
    /// failure and busy. `Locked`, `Connection` and `Failover` are recognised but opt-in.
    pub const DEFAULT: KindSet = KindSet(
        (1 << TransientKind::Deadlock as u8)
            | (1 << TransientKind::LockTimeout as u8)
            | (1 << TransientKind::SerializationFailure as u8)
            | (1 << TransientKind::Busy as u8),
    );

    /// Every kind.
    pub const ALL: KindSet = KindSet(0b111_1111);

    /// Whether `kind` is in the set.
    pub fn contains(self, kind: TransientKind) -> bool {
        self.0 & kind.bit() != 0
    }

    /// The set with `kind` added.
    #[must_use]
    pub fn with(self, kind: TransientKind) -> KindSet {
        KindSet(self.0 | kind.bit())
    }

    /// The set with `kind` removed.
    #[must_use]
    pub fn without(self, kind: TransientKind) -> KindSet {
        KindSet(self.0 & !kind.bit())
    }

    /// The kinds in the set, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = TransientKind> {
        TransientKind::ALL
            .into_iter()
            .filter(move |k| self.contains(*k))
    }
}

impl FromIterator<TransientKind> for KindSet {
    fn from_iter<I: IntoIterator<Item = TransientKind>>(iter: I) -> Self {
        iter.into_iter().fold(KindSet::EMPTY, KindSet::with)
    }
}

impl From<TransientKind> for KindSet {
    fn from(kind: TransientKind) -> Self {
        KindSet::EMPTY.with(kind)
    }
}

impl<const N: usize> From<[TransientKind; N]> for KindSet {
    fn from(kinds: [TransientKind; N]) -> Self {
        kinds.into_iter().collect()
    }
}

/// The verdict together with the code that decided it, so events and metrics can say why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Classification {
    /// What the failure means.
    pub verdict: Verdict,
    /// Which code matched; `None` when nothing in the error was recognised.
    pub code: Option<crate::Code>,
}

impl Classification {
    /// A classification with a verdict and the code behind it.
    pub const fn new(verdict: Verdict, code: Option<crate::Code>) -> Self {
        Classification { verdict, code }
    }

    /// Nothing recognised: permanent, no code.
    pub const PERMANENT: Classification = Classification::new(Verdict::Permanent, None);
}

impl fmt::Display for Classification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => write!(f, "{} by {code}", self.verdict),
            None => write!(f, "{}", self.verdict),
        }
    }
}
