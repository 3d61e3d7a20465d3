//! Why a toolbox could not be built.

use txretry_core::PolicyError;

use crate::config::ConfigError;
#[cfg(doc)]
use crate::{Tool, ToolboxBuilder};

/// Why [`ToolboxBuilder::build`] refused the settings.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Two tools have this name.
    #[error("two tools are named {0:?}")]
    DuplicateTool(String),
    /// A tool name is empty, longer than 64 characters, or has a character other than
    /// ASCII letters, digits, `_` and `-`.
    #[error("invalid tool name {0:?}: use 1 to 64 ASCII letters, digits, '_' or '-'")]
    InvalidToolName(String),
    /// A persona or agent list names a tool that is not registered.
    #[error("{list} names {tool:?}, which is not a registered tool")]
    UnknownTool {
        /// The list, e.g. `persona "refunds"`.
        list: String,
        /// The tool it names.
        tool: String,
    },
    /// Two persona lists (or two agent lists) have the same name.
    #[error("two {kind} lists are named {name:?}")]
    DuplicateList {
        /// `"persona"` or `"agent"`.
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// The config is invalid for these tools (it names an unknown tool, or a value does not
    /// fit the policy it is layered over).
    #[error("{0}")]
    Config(#[source] ConfigError),
    /// A policy could not be rebuilt with the toolbox's hooks.
    #[error("{0}")]
    Policy(#[source] PolicyError),
    /// A tool declared [`once`](Tool::once) cannot be: it is read-only (nothing to record).
    #[error("tool {tool:?} cannot be once: {reason}")]
    OnceNotAllowed {
        /// The tool.
        tool: String,
        /// Why.
        reason: &'static str,
    },
}
