//! A [`Toolbox`]'s tools as [rig](https://docs.rs/rig-core) tools (feature `rig`, rig-core
//! 0.44).
//!
//! [`tools`] turns the tools a toolbox offers one [`Caller`] into rig's runtime-defined tools
//! ([`DynamicTool`]): add them to an agent (`rig_agent`'s
//! `AgentBuilder::dynamic_tools(tools)`) or a `ToolSet` (`ToolSet::from_dynamic_tools(tools)`).
//! A tool the caller is not offered is simply absent, so rig answers a call to it like a call
//! to any unknown name.
//!
//! Every call runs [`Toolbox::invoke`]: the gate, the argument check, one retry budget. Its
//! errors become rig's [`ToolExecutionError`] ([`tool_error`]) marked **not retryable**
//! (`retryable: Some(false)`) whatever their kind: txretry already retried what could be
//! retried, so a deadlock it gave up on must not send the model into a loop. The model reads
//! the [`InvokeError`]'s short text (kind and attempts; "check before trying again" when the
//! call may have taken effect).
//!
//! ```no_run
//! use txretry_tool::{Caller, Toolbox};
//!
//! # fn demo(toolbox: Toolbox) {
//! let tools = txretry_tool::rig::tools(&toolbox, &Caller::new(["support"]));
//! // rig_agent::AgentBuilder: `.dynamic_tools(tools)`;
//! // or rig_agent::tool::ToolSet::from_dynamic_tools(tools).
//! # let _ = tools; }
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use rig_core::message::ToolName;
use rig_core::tool::{DynamicTool, ToolErrorKind, ToolExecutionError, ToolOutput};
use serde_json::Value;

use crate::{Caller, InvokeError, Toolbox};

/// The tools `toolbox` offers `caller` ([`Toolbox::offered`], in registration order) as rig
/// dynamic tools: name, description and JSON Schema from the declarations; each call is
/// [`Toolbox::invoke`] for `caller`, with a call id `rig-{process}-{n}`: 64 random bits
/// drawn once per process and a counter, so that no two calls share one, in this process
/// or any other.
///
/// rig does not hand a tool the model's tool-call id, so a call id made here is new for
/// every call: a `once` tool keyed by it ([`Once::new`](crate::Once::new)) records the
/// call and resolves its own ambiguous COMMIT, but a call the model makes again is a new
/// call. To answer a repeated request from its record, derive the key from the arguments
/// ([`Once::key_from_args`](crate::Once::key_from_args), e.g. a request id the model
/// passes).
///
/// The output: a string as text, anything else as JSON. The errors: see [`tool_error`].
pub fn tools(toolbox: &Toolbox, caller: &Caller) -> Vec<DynamicTool> {
    toolbox
        .offered(caller)
        .into_iter()
        .filter_map(|descriptor| {
            let name = ToolName::new(descriptor.name()).ok()?;
            let (toolbox, caller, tool) = (
                toolbox.clone(),
                caller.clone(),
                descriptor.name().to_owned(),
            );
            Some(DynamicTool::new(
                name,
                descriptor.description(),
                descriptor.input_schema().clone(),
                move |args: Value| {
                    let (toolbox, caller, tool) = (toolbox.clone(), caller.clone(), tool.clone());
                    Box::pin(async move {
                        let n = NEXT.fetch_add(1, Ordering::Relaxed);
                        let call_id = format!("rig-{}-{n}", crate::call_id::instance());
                        match toolbox.invoke(&caller, &tool, args, &call_id).await {
                            Ok(Value::String(text)) => Ok(ToolOutput::text(text)),
                            Ok(output) => Ok(ToolOutput::json(output)),
                            Err(error) => Err(tool_error(&tool, error)),
                        }
                    })
                },
            ))
        })
        .collect()
}

static NEXT: AtomicU64 = AtomicU64::new(1);

/// rig's error for an [`InvokeError`] of the tool `tool`, always with `retryable: Some(false)`
/// (txretry already retried), its text visible to the model, the error kept as the source
/// (downcast it with `ToolExecutionError::downcast_ref::<InvokeError>()`), and a code:
///
/// | error | rig kind | code |
/// |---|---|---|
/// | [`Refused`](InvokeError::Refused) | `NotFound`, worded like rig's own unknown-tool error | `refused` |
/// | [`InvalidArguments`](InvokeError::InvalidArguments) | `InvalidArgs` | `invalid_arguments` |
/// | [`Failed`](InvokeError::Failed), timed out | `Timeout` | `timed_out` |
/// | [`Failed`](InvokeError::Failed), anything else | `Other` | the [`FailureKind`](crate::FailureKind) (`business`, `retries_exhausted`, `ambiguous`, …) |
/// | [`InvalidOutput`](InvokeError::InvalidOutput) | `Other` | `invalid_output` |
pub fn tool_error(tool: &str, error: InvokeError) -> ToolExecutionError {
    let message = error.to_string();
    let mapped = match &error {
        InvokeError::Refused { .. } => {
            ToolExecutionError::not_found(format!("no tool named `{tool}` is registered"))
                .with_model_feedback(format!("tool `{tool}` not found"))
                .with_code("refused")
        }
        InvokeError::InvalidArguments { .. } => {
            ToolExecutionError::invalid_args(message).with_code("invalid_arguments")
        }
        InvokeError::Failed(failure) => {
            let kind = match failure.kind() {
                crate::FailureKind::TimedOut => ToolErrorKind::Timeout,
                _ => ToolErrorKind::Other,
            };
            ToolExecutionError::new(kind, message).with_code(failure.kind().as_str())
        }
        InvokeError::InvalidOutput { .. } => {
            ToolExecutionError::other(message).with_code("invalid_output")
        }
        // A variant added later is at least an error the model reads.
        #[allow(unreachable_patterns)]
        _ => ToolExecutionError::other(message),
    };
    mapped.with_retryable(false).with_source(error)
}
