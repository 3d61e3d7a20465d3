//! txretry retries a database transaction, in place, when the server says the failure was
//! transient (deadlock, lock-wait timeout, serialization failure, `SQLITE_BUSY`), and lets
//! every other failure surface exactly once.
//!
//! Pick your driver with a cargo feature; `RetryPolicy::default()` then recognises its
//! errors with no further setup:
//!
//! | feature | module | driver |
//! |---|---|---|
//! | `sqlx-postgres`, `sqlx-mysql`, `sqlx-sqlite` | [`txretry::sqlx`](crate#features) | sqlx 0.9 |
//! | `tokio-postgres` | `txretry::tokio_postgres` | tokio-postgres 0.7 |
//! | `mysql_async` | `txretry::mysql_async` | mysql_async 0.37 |
//! | `rusqlite` | `txretry::rusqlite` | rusqlite 0.39 (blocking) |
//! | `sea-orm-postgres`, `sea-orm-mysql`, `sea-orm-sqlite` | `txretry::sea_orm` | SeaORM 2 on its sqlx drivers |
//! | `diesel-postgres`, `diesel-mysql`, `diesel-sqlite` | `txretry::diesel` | Diesel 2.4 (blocking) |
//! | `diesel-async-postgres`, `diesel-async-mysql` | `txretry::diesel` (`async_transaction`) | diesel-async 0.10 |
//!
//! The four things to know:
//! - a **policy** ([`RetryPolicy`]) says how to retry: attempts, backoff, which kinds;
//!   build it once and share it;
//! - a **runner call** (`txretry::sqlx::transaction(&pool, &policy, async |tx| …)`, and
//!   `transaction_with(…, &options, …)` with per-call [`TxOptions`]) runs your closure in a
//!   fresh transaction per attempt, commits on `Ok`, rolls back on `Err`;
//! - a **verdict** ([`Verdict`]) is what a failure means: transient (retried), ambiguous
//!   (the commit may have landed: retried only for idempotent calls), permanent (yours:
//!   returned once);
//! - an **outcome** ([`Outcome`]) comes back with your own error in a [`TxError`]: the
//!   verdict, the phase (body or commit), the attempts.
//!
//! ```
//! use txretry::{RetryPolicy, TransientKind, Verdict};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let policy = RetryPolicy::default(); // 2 attempts, 150 ms × N linear backoff
//!
//! // What the default classifier makes of a driver's message (no typed code here):
//! let deadlock = std::io::Error::other("Deadlock found when trying to get lock");
//! assert_eq!(txretry::classify(&deadlock).verdict, Verdict::Transient(TransientKind::Deadlock));
//! let refused = std::io::Error::other("refund refused: customer reports a deadlock");
//! assert_eq!(txretry::classify(&refused).verdict, Verdict::Permanent);
//!
//! // The same loop the runners use, around any operation:
//! let mut attempts = 0;
//! let result: Result<&str, std::io::Error> = policy
//!     .run(async || {
//!         attempts += 1;
//!         if attempts == 1 {
//!             return Err(std::io::Error::other("Deadlock found when trying to get lock"));
//!         }
//!         Ok("committed")
//!     })
//!     .await;
//! assert_eq!(result.unwrap(), "committed");
//! # }
//! ```
//!
//! # Features
//! Each driver feature adds a module with a `transaction` runner; see the README for a
//! ten-line example per driver and what a runner guarantees at the commit boundary.

pub use txretry_core::{
    Admission, AsError, AttemptFailure, Backoff, Classification, Classifier, Code, ContentionKey,
    Decision, GiveUpEvent, Isolation, Jitter, KeyEncoder, KeyHash, KindSet, MessageFallback,
    Outcome, Phase, PolicyError, Profile, RetryBudget, RetryEvent, RetryPolicy, RetryPolicyBuilder,
    SqlState, SqliteBegin, StopReason, TransientKind, TxError, TxOptions, Verdict, classify,
    default_verdict,
};

/// sqlx 0.9 (features `sqlx-postgres`, `sqlx-mysql`, `sqlx-sqlite`): error codes and
/// retrying transaction runners.
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]
pub use txretry_sqlx as sqlx;

/// tokio-postgres 0.7 (feature `tokio-postgres`): error codes and a retrying transaction runner.
#[cfg(feature = "tokio-postgres")]
pub use txretry_tokio_postgres as tokio_postgres;

/// mysql_async 0.37 (feature `mysql_async`): error codes and a retrying transaction runner.
#[cfg(feature = "mysql_async")]
pub use txretry_mysql_async as mysql_async;

/// rusqlite (feature `rusqlite`, blocking): error codes and a retrying transaction runner.
#[cfg(feature = "rusqlite")]
pub use txretry_rusqlite as rusqlite;

/// Diesel 2.4 (features `diesel-postgres`, `diesel-mysql`, `diesel-sqlite`, blocking) and
/// diesel-async 0.10 (features `diesel-async-postgres`, `diesel-async-mysql`): error codes,
/// including those Diesel drops, and retrying transaction runners.
#[cfg(any(
    feature = "diesel-postgres",
    feature = "diesel-mysql",
    feature = "diesel-sqlite",
    feature = "diesel-async-postgres",
    feature = "diesel-async-mysql"
))]
pub use txretry_diesel as diesel;
/// SeaORM 2 (features `sea-orm-postgres`, `sea-orm-mysql`, `sea-orm-sqlite`): `DbErr`'s
/// codes, read through the sqlx error inside it, and a retrying transaction runner.
#[cfg(any(
    feature = "sea-orm-postgres",
    feature = "sea-orm-mysql",
    feature = "sea-orm-sqlite"
))]
pub use txretry_sea_orm as sea_orm;

/// Transactional tools for LLM agents (feature `tool`): a [`Toolbox`](tool::Toolbox) whose
/// every invocation has one retry budget shared by the runners its handler calls, restart
/// safety, per-attempt timeouts and a fail-closed role/persona/agent gate. Each driver
/// feature enabled with it turns on that driver's exactly-once calls (`ToolContext::once`
/// for the `sqlx-*` features, `once_tokio_postgres`, `once_mysql_async`, `once_rusqlite`).
#[cfg(feature = "tool")]
pub use txretry_tool as tool;

// The guides: always documented; compiled, and their examples tested, with the features
// those examples use.
#[cfg(any(
    doc,
    all(
        feature = "sqlx-postgres",
        feature = "sqlx-sqlite",
        feature = "tokio-postgres",
        feature = "tool"
    )
))]
pub mod docs;

/// The README's examples, compiled (and the runnable ones run) as doc tests so they cannot
/// drift from the API.
#[cfg(all(
    doctest,
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite",
    feature = "tokio-postgres",
    feature = "mysql_async",
    feature = "rusqlite",
    feature = "diesel-postgres",
    feature = "sea-orm-postgres",
    feature = "tool"
))]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;
