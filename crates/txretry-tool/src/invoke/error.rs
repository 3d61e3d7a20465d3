//! Why a tool call did not return a result.

use crate::{OnceRefused, ToolFailure};

/// Why a tool call did not return a result.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    /// The tool does not exist, or is not offered to this caller; which of the two is not
    /// said, on purpose. The handler did not run.
    #[error("tool {tool:?} is not available")]
    Refused {
        /// The name the caller asked for (cut to 64 characters).
        tool: String,
    },
    /// The arguments do not fit the tool's schema. The handler did not run.
    #[error("{tool}: invalid arguments: {message}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What is wrong, and where (`items[2].qty: invalid type: …`).
        message: String,
    },
    /// The handler ran and the call failed: see [`ToolFailure`].
    #[error(transparent)]
    Failed(ToolFailure),
    /// The handler returned `Ok` (and may have committed), but its output could not be
    /// serialized to JSON. Not retried.
    #[error("{tool}: the tool ran but its result could not be encoded; it may have taken effect")]
    InvalidOutput {
        /// The tool.
        tool: String,
        /// serde_json's error.
        #[source]
        error: serde_json::Error,
    },
    /// A [`once`](crate::Tool::once) tool's call was refused: its idempotency key could not
    /// be had (the handler did not run), or the handler broke the one-transaction rule (see
    /// [`OnceRefused`]). Not retried.
    #[error("{tool}: {reason}")]
    OnceRefused {
        /// The tool.
        tool: String,
        /// Why.
        #[source]
        reason: OnceRefused,
    },
}

impl InvokeError {
    /// The refusal of `name`, cut to 64 characters.
    pub(crate) fn refused(name: &str) -> Self {
        let tool = match name.char_indices().nth(64) {
            Some((cut, _)) => format!("{}…", &name[..cut]),
            None => name.to_owned(),
        };
        InvokeError::Refused { tool }
    }

    /// The failure, when the handler ran and failed.
    pub fn failure(&self) -> Option<&ToolFailure> {
        match self {
            InvokeError::Failed(failure) => Some(failure),
            _ => None,
        }
    }
}
