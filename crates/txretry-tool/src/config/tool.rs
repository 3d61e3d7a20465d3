//! One tool's section of a config file.

use std::time::Duration;

use serde::Deserialize;
use txretry_core::TransientKind;

use super::{BackoffKind, JitterConfig, PolicyConfig, duration, kinds};

/// One tool's settings in a config file: the [`PolicyConfig`] keys (layered over the tool's
/// own policy, else the toolbox's), plus `idempotent`, `restart_safe` and `timeout` (a
/// duration per attempt). A section with only the last three keys keeps the policy the
/// tool already had, and its level (`"toolbox"` stays `"toolbox"`).
// The policy keys are repeated rather than a `#[serde(flatten)]` `PolicyConfig`: serde
// cannot deny unknown fields through a flatten, and a misspelt key must be an error.
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct ToolConfig {
    /// See [`PolicyConfig::max_attempts`].
    pub max_attempts: Option<u32>,
    /// See [`PolicyConfig::backoff`].
    pub backoff: Option<BackoffKind>,
    /// See [`PolicyConfig::initial_delay`].
    #[serde(default, deserialize_with = "duration::optional")]
    pub initial_delay: Option<Duration>,
    /// See [`PolicyConfig::backoff_factor`].
    pub backoff_factor: Option<f64>,
    /// See [`PolicyConfig::max_delay`].
    #[serde(default, deserialize_with = "duration::optional")]
    pub max_delay: Option<Duration>,
    /// See [`PolicyConfig::max_elapsed`].
    #[serde(default, deserialize_with = "duration::optional")]
    pub max_elapsed: Option<Duration>,
    /// See [`PolicyConfig::jitter`].
    pub jitter: Option<JitterConfig>,
    /// See [`PolicyConfig::retry_on`].
    #[serde(default, deserialize_with = "kinds::optional")]
    pub retry_on: Option<Vec<TransientKind>>,
    /// See [`PolicyConfig::failover`].
    #[serde(default, deserialize_with = "duration::optional")]
    pub failover: Option<Duration>,
    /// See [`Tool::idempotent`](crate::Tool::idempotent).
    pub idempotent: Option<bool>,
    /// See [`Tool::restart_safe`](crate::Tool::restart_safe).
    pub restart_safe: Option<bool>,
    /// See [`Tool::timeout`](crate::Tool::timeout).
    #[serde(default, deserialize_with = "duration::optional")]
    pub timeout: Option<Duration>,
}

super::table::table_only!(ToolConfig, "a table of a tool's keys");

impl ToolConfig {
    /// The policy keys of this section.
    pub fn policy(&self) -> PolicyConfig {
        PolicyConfig {
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            initial_delay: self.initial_delay,
            backoff_factor: self.backoff_factor,
            max_delay: self.max_delay,
            max_elapsed: self.max_elapsed,
            jitter: self.jitter,
            retry_on: self.retry_on.clone(),
            failover: self.failover,
        }
    }
}
