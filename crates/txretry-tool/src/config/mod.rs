//! Retry settings read from a file (YAML, TOML, JSON: anything serde reads), per agent and
//! per tool. Unknown keys and invalid values are errors that name the field; nothing is
//! silently dropped.
//!
//! - `policy.rs`: a policy's keys ([`PolicyConfig`], [`BackoffKind`]) and how they are
//!   layered over a policy; `jitter.rs`: [`JitterConfig`];
//! - `tool.rs`, `toolbox.rs`: a tool's section ([`ToolConfig`]), the whole file
//!   ([`ToolboxConfig`]);
//! - `duration.rs`, `kinds.rs`: how durations (`"150ms"`) and kind names are read;
//!   `table.rs`: sections read from tables only, never from lists;
//! - `error.rs`: [`ConfigError`], which names the field.

mod duration;
mod error;
mod jitter;
mod kinds;
mod policy;
mod table;
mod tool;
mod toolbox;

pub use self::error::{ConfigError, ConfigErrorKind};
pub use self::jitter::JitterConfig;
pub use self::policy::{BackoffKind, PolicyConfig};
pub use self::tool::ToolConfig;
pub use self::toolbox::ToolboxConfig;
