//! The core of [txretry](https://docs.rs/txretry): verdicts, code tables, the classifier,
//! the retry policy and the retry loop. It depends on no database driver; each driver
//! adapter teaches the default classifier its typed error codes.
//!
//! Most users depend on the `txretry` facade with a driver feature instead of this crate.

mod admission;
mod backoff;
mod budget;
mod chain;
mod classifier;
mod code;
mod event;
mod failover;
mod key;
mod message;
mod options;
mod outcome;
mod policy;
mod profile;
mod registry;
mod run;
mod sleep;
mod table;
mod verdict;

pub use admission::Admission;
pub use backoff::{Backoff, Jitter};
pub use budget::RetryBudget;
pub use chain::AsError;
pub use classifier::{Classifier, classify};
pub use code::{Code, SqlState};
pub use event::{GiveUpEvent, RetryEvent};
pub use key::{ContentionKey, KeyEncoder, KeyHash};
pub use message::MessageFallback;
pub use options::{Isolation, SqliteBegin, TxOptions};
pub use outcome::{AttemptFailure, Outcome, Phase, RecordedAttempt, TxError};
pub use policy::{Decision, PolicyError, RetryPolicy, RetryPolicyBuilder, StopReason};
pub use profile::Profile;
pub use table::default_verdict;
pub use verdict::{Classification, KindSet, TransientKind, Verdict};

// The adapter crates' machinery: public so they can use it, hidden from the docs and
// not re-exported by the `txretry` facade.
#[doc(hidden)]
pub use chain::{ViaDeref, ViaDerefSendSync, ViaError};
#[doc(hidden)]
pub use registry::{CodeExtractor, io_cause, io_code, io_unmendable};
#[doc(hidden)]
pub use run::{RetryState, TxFailure};

#[doc(hidden)]
pub mod __private {
    pub use crate::admission::{
        DatabaseLocks, Permit, admission_for, database_locks, note_busy, note_failure,
    };
    pub use crate::registry::Extractor;
    pub use crate::sleep::sleep;
    pub use inventory;
}
