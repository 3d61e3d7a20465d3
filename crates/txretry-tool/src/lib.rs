//! Transactional tools for LLM agents, on [txretry](https://docs.rs/txretry).
//!
//! An agent calls *tools*, and many of them do their work in a database transaction
//! (`cancel_order`, `transfer`, `book_seat`). When such a transaction deadlocks, times out
//! on a lock or fails serialization, the tool should retry it in place and the model should
//! never hear of it; when it fails for a real reason ("order not found", a constraint), the
//! model should hear it exactly once. txretry's runners do the database half; this crate
//! does the tool half:
//!
//! - a [`Toolbox`] of [`Tool`]s with typed arguments (serde + JSON Schema), async or
//!   blocking handlers, and per-tool options (roles, retry policy, `restart_safe`,
//!   `idempotent`, per-attempt timeout);
//! - **one budget per invocation**: the handler's [`ToolContext::policy`] is the tool's
//!   effective policy bound to a shared [`RetryBudget`](txretry_core::RetryBudget), so the runners it
//!   calls (any driver) and the invocation loop draw on the same `max_attempts`; a
//!   transaction that deadlocks every time runs `max_attempts` times in all;
//! - **policy precedence**: the tool's own, else the toolbox's, else
//!   `RetryPolicy::default()`; the level is in every event;
//! - **committed work is never re-run**, `restart_safe(false)` runs the handler at most
//!   once, timeouts and ambiguous commits are retried only for `idempotent` tools, and a
//!   timed-out attempt is cancelled before the next starts;
//! - **typed outcomes**: a business error or any `Ok` output surfaces once, untouched; a
//!   failure carries every attempt's error and verdict, the runners' transaction attempts
//!   included ([`InvokeError`], [`ToolFailure`], [`CallAttempt`]);
//! - **a fail-closed gate**: [`Toolbox::offered`] = registered ∩ the caller's roles ∩ the
//!   persona's list ∩ the agent's list, checked when a call starts (a toolbox does not
//!   change, and a call keeps the one it started on); an unknown tool and a tool not
//!   offered get the same refusal;
//! - **events** to the toolbox's `on_retry` / `on_give_up` hooks and to `tracing`, with
//!   the tool's name, the call id and the policy level;
//! - **configuration from a file** ([`ToolboxConfig`]), with errors that name the field;
//! - **exactly once** ([`Once`]): a call's outcome is recorded in the transaction of its
//!   writes, and a call repeated with the same key gets it back; on every driver txretry
//!   has a runner for: [`ToolContext::once`](ToolContext#method.once) (sqlx pools, features
//!   `sqlx-postgres`, `sqlx-mysql`, `sqlx-sqlite`), `ToolContext::once_tokio_postgres`
//!   (feature `tokio-postgres`), `ToolContext::once_mysql_async` (feature `mysql_async`),
//!   and `ToolContext::once_rusqlite` for blocking tools (feature `rusqlite`).
//!
//! ```no_run
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use txretry_tool::{BoxError, Caller, Tool, ToolContext, Toolbox};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct CancelOrder { order_id: i64 }
//!
//! # async fn demo(pool: sqlx::SqlitePool) -> Result<(), Box<dyn std::error::Error>> {
//! let toolbox = Toolbox::builder()
//!     .on_retry(|e| eprintln!("{}: retrying after attempt {} ({:?})", e.tool.unwrap_or(""), e.attempt, e.kind()))
//!     .tool(Tool::new("cancel_order", "Cancel an open order.", move |ctx: ToolContext, args: CancelOrder| {
//!         let pool = pool.clone();
//!         async move {
//!             // The runner draws its retries from this invocation's budget.
//!             let cancelled = txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| {
//!                 sqlx::query("UPDATE orders SET status = 'cancelled' WHERE id = ? AND status = 'open'")
//!                     .bind(args.order_id)
//!                     .execute(&mut **tx)
//!                     .await
//!                     .map(|done| done.rows_affected())
//!             })
//!             .await?;
//!             if cancelled == 0 {
//!                 return Err::<_, BoxError>("order not found".into());
//!             }
//!             Ok(format!("order {} cancelled", args.order_id))
//!         }
//!     }).roles(["support"]))
//!     .build()?;
//!
//! let out = toolbox
//!     .invoke(&Caller::new(["support"]), "cancel_order", serde_json::json!({"order_id": 7}), "call-1")
//!     .await?;
//! # let _ = out; Ok(()) }
//! ```
//!
//! # Errors
//! Handlers return any `E: Into<`[`BoxError`]`>`; see there for what is kept.

#[cfg(any(feature = "mcp", feature = "rig"))]
mod call_id;
mod config;
mod context;
mod descriptor;
mod error_text;
mod invoke;
#[cfg(feature = "mcp")]
pub mod mcp;
mod once;
#[cfg(feature = "rig")]
pub mod rig;
mod tool;
mod toolbox;

pub use config::{
    BackoffKind, ConfigError, ConfigErrorKind, JitterConfig, PolicyConfig, ToolConfig,
    ToolboxConfig,
};
pub use context::ToolContext;
pub use descriptor::ToolDescriptor;
pub use invoke::{
    CallAttempt, FailureKind, InvokeError, Panicked, TimedOut, ToolAttempt, ToolFailure,
};
#[cfg(sqlx_once)]
pub use once::OnceBackend;
#[cfg(once_records)]
pub use once::OnceError;
pub use once::{BusinessError, Dialect, InvalidTableName, Once, OnceRefused};
pub use tool::{BoxError, Tool};
pub use toolbox::{BuildError, Caller, Toolbox, ToolboxBuilder};
