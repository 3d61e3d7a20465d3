//! The toolbox: registered tools, their effective policies, and the gate that decides what a
//! caller is offered and may invoke.
//!
//! - `caller.rs`: who is asking ([`Caller`]);
//! - `builder.rs`: how a toolbox is built and each tool's policy resolved ([`ToolboxBuilder`]);
//! - `registry.rs`: what a built toolbox holds, and the gate;
//! - `names.rs`: the maps of registered names;
//! - `error.rs`: why a build was refused ([`BuildError`]).

mod builder;
mod caller;
mod error;
mod names;
mod registry;

use std::fmt;
use std::sync::Arc;

pub use self::builder::ToolboxBuilder;
pub use self::caller::Caller;
pub use self::error::BuildError;
pub(crate) use self::registry::Registry;
use crate::ToolDescriptor;

/// A set of tools, the agent-level policy and hooks, and the persona and agent allow-lists.
/// Build it once with [`Toolbox::builder`]; it is immutable, cheap to clone (an `Arc`) and
/// `Send + Sync`.
///
/// - [`offered`](Toolbox::offered) lists what a [`Caller`] may use;
/// - [`invoke`](Toolbox::invoke) runs one tool call: the gate and the arguments checked
///   before the first attempt, one retry budget for the whole call.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use txretry_core::RetryPolicy;
/// use txretry_tool::{BoxError, Caller, InvokeError, Tool, ToolContext, Toolbox};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct CancelOrder {
///     order_id: i64,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let toolbox = Toolbox::builder()
///     .policy(RetryPolicy::builder().max_attempts(3).build()?)
///     .on_retry(|e| eprintln!("{:?} retried after attempt {}", e.tool, e.attempt))
///     .tool(
///         Tool::new("cancel_order", "Cancel an open order.", |ctx: ToolContext, args: CancelOrder| async move {
///             // A real handler runs its transaction with the invocation's policy:
///             //   txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| { … }).await?;
///             assert_eq!(ctx.policy().max_attempts(), 3);
///             if args.order_id != 42 {
///                 return Err::<String, BoxError>("order not found".into());
///             }
///             Ok(format!("order {} cancelled", args.order_id))
///         })
///         .roles(["support"]),
///     )
///     .persona("refunds", ["cancel_order"])
///     .build()?;
///
/// let support = Caller::new(["support"]).persona("refunds");
/// assert_eq!(toolbox.offered(&support).len(), 1);
/// assert!(toolbox.offered(&Caller::new(["sales"])).is_empty());
///
/// let out = toolbox.invoke(&support, "cancel_order", serde_json::json!({"order_id": 42}), "call-1").await?;
/// assert_eq!(out, "order 42 cancelled");
///
/// // A business error surfaces once, as the handler said it.
/// let err = toolbox.invoke(&support, "cancel_order", serde_json::json!({"order_id": 7}), "call-2").await.unwrap_err();
/// assert_eq!(err.to_string(), "cancel_order: order not found");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Toolbox {
    pub(crate) inner: Arc<Registry>,
}

impl Toolbox {
    /// A builder with no tools, no policy (tools without one then use
    /// `RetryPolicy::default()`), no hooks and no lists.
    pub fn builder() -> ToolboxBuilder {
        ToolboxBuilder::default()
    }

    /// The tools `caller` may use, in registration order: every registered tool that
    /// passes all three layers of the gate.
    ///
    /// - **roles**: a tool with a role list needs one of the caller's roles;
    /// - **persona**: when the caller names a persona, only the tools on its list;
    /// - **agent**: when the caller names an agent, only the tools on its list.
    ///
    /// An absent list does not restrict its layer; an empty list allows nothing; a persona
    /// or agent the toolbox does not know allows nothing (fail-closed).
    pub fn offered(&self, caller: &Caller) -> Vec<&ToolDescriptor> {
        let inner = &*self.inner;
        (0..inner.tools.len())
            .filter(|&index| inner.allows(caller, index))
            .map(|index| &inner.tools[index].descriptor)
            .collect()
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.inner.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.inner.tools.is_empty()
    }
}

impl fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .inner
            .tools
            .iter()
            .map(|e| e.descriptor.name.as_str())
            .collect();
        f.debug_struct("Toolbox")
            .field("tools", &names)
            .finish_non_exhaustive()
    }
}
