//! The core of [txretry](https://docs.rs/txretry): verdicts, code tables, the classifier,
//! the retry policy and the retry loop. It depends on no database driver; driver adapters
//! register how to read their typed error codes (see [`register_extractor!`]).
//!
//! Most users depend on the `txretry` facade with a driver feature instead of this crate.

mod admission;
mod backoff;
mod chain;
mod classifier;
mod code;
mod event;
mod message;
mod options;
mod policy;
mod profile;
mod registry;
mod run;
mod table;
mod verdict;

pub use admission::Admission;
pub use backoff::{Backoff, Jitter};
pub use chain::{AsError, ViaDeref, ViaDerefSendSync, ViaError};
pub use classifier::{Classifier, classify};
pub use code::{Code, SqlState};
pub use event::RetryEvent;
pub use options::{Isolation, SqliteBegin, TxOptions};
pub use policy::{Decision, PolicyError, RetryPolicy, RetryPolicyBuilder, StopReason};
pub use profile::Profile;
pub use registry::{CODE_EXTRACTORS, CodeExtractor, io_code};
pub use run::{RetryState, TxFailure};
pub use table::default_verdict;
pub use verdict::{Classification, KindSet, TransientKind, Verdict};

#[doc(hidden)]
pub mod __private {
    pub use crate::admission::{Permit, admission_for};
    pub use linkme;
    pub use tokio::time::sleep;
}
