//! A retry policy's keys in a config file, and how they are layered over a policy.

use std::time::Duration;

use serde::Deserialize;
use txretry_core::{Backoff, Jitter, KindSet, PolicyError, RetryPolicy, TransientKind};

use super::{ConfigError, JitterConfig, duration, kinds};

/// A retry policy as users write it in a config file. Every key is optional: a key that is
/// present overrides the level below (the toolbox's policy for `agent`, the tool's or the
/// toolbox's for a tool), a key that is absent keeps it.
///
/// | key | value | example |
/// |---|---|---|
/// | `max_attempts` | attempts in total, at least 1 (1 = no retry) | `3` |
/// | `backoff` | `none`, `constant`, `linear`, `exponential` | `"exponential"` |
/// | `initial_delay` | the first wait (the step, for linear) | `"150ms"`, `"2s"`, `"1m30s"` |
/// | `backoff_factor` | growth per attempt, at least 1 (implies `exponential`) | `2.0` |
/// | `max_delay` | a cap on every wait | `"5s"` |
/// | `max_elapsed` | stop retrying past this time since the first attempt | `"30s"` |
/// | `jitter` | `"none"`, `"full"`, or a number in 0..=1 (± that fraction) | `0.2` |
/// | `retry_on` | transient kinds retried | `["deadlock", "busy"]` |
/// | `failover` | ride out a failover (or a lost connection) for up to this long: `RetryPolicyBuilder::failover` | `"60s"` |
///
/// Durations are a number and a unit (`ns`, `us`, `ms`, `s`, `m`, `h`), possibly several
/// (`"1m 30s"`); a bare number is refused (seconds or milliseconds?). Kinds are
/// `deadlock`, `lock_timeout`, `serialization_failure`, `busy`, `locked`, `connection`,
/// `failover`.
///
/// The backoff keys go together: when any of `backoff`, `initial_delay` and
/// `backoff_factor` is present, the backoff is rebuilt from them, and the absent ones take
/// the defaults (`linear`, or `exponential` when a factor is given; 150 ms; factor 2);
/// `initial_delay` and `backoff_factor` with `backoff = "none"` are refused.
///
/// ```
/// use txretry_tool::PolicyConfig;
///
/// let config: PolicyConfig = serde_json::from_str(
///     r#"{ "max_attempts": 4, "initial_delay": "50ms", "backoff_factor": 2, "jitter": "full" }"#,
/// )?;
/// let policy = config.to_policy()?;
/// assert_eq!(policy.max_attempts(), 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, remote = "Self")]
pub struct PolicyConfig {
    /// Attempts in total, the first included.
    pub max_attempts: Option<u32>,
    /// The backoff curve.
    pub backoff: Option<BackoffKind>,
    /// The first wait (for linear backoff: the step).
    #[serde(default, deserialize_with = "duration::optional")]
    pub initial_delay: Option<Duration>,
    /// The exponential growth factor.
    pub backoff_factor: Option<f64>,
    /// A cap on every wait.
    #[serde(default, deserialize_with = "duration::optional")]
    pub max_delay: Option<Duration>,
    /// A limit on the time spent retrying.
    #[serde(default, deserialize_with = "duration::optional")]
    pub max_elapsed: Option<Duration>,
    /// The jitter.
    pub jitter: Option<JitterConfig>,
    /// The transient kinds retried.
    #[serde(default, deserialize_with = "kinds::optional")]
    pub retry_on: Option<Vec<TransientKind>>,
    /// The failover budget: an outage (failover or connection failures) is ridden out for
    /// up to this long ([`RetryPolicyBuilder::failover`](txretry_core::RetryPolicyBuilder::failover)).
    #[serde(default, deserialize_with = "duration::optional")]
    pub failover: Option<Duration>,
}

super::table::table_only!(PolicyConfig, "a table of policy keys");

/// A backoff curve's name in a config file.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackoffKind {
    /// Retry at once.
    None,
    /// Always `initial_delay`.
    Constant,
    /// `initial_delay × N`.
    Linear,
    /// `initial_delay × backoff_factor^(N-1)`.
    Exponential,
}

impl PolicyConfig {
    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        *self == PolicyConfig::default()
    }

    /// The policy: `RetryPolicy::default()` with the keys present applied.
    pub fn to_policy(&self) -> Result<RetryPolicy, ConfigError> {
        self.build_on(&RetryPolicy::default(), "")
    }

    /// `base` with the keys present applied (its classifier, hooks and admission kept).
    /// Errors name the field under `prefix` (`"agent"` gives `agent.max_delay`).
    pub fn build_on(&self, base: &RetryPolicy, prefix: &str) -> Result<RetryPolicy, ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::invalid(prefix, key, message);
        let mut builder = base.to_builder();
        if let Some(n) = self.max_attempts {
            if n == 0 {
                return Err(invalid(
                    "max_attempts",
                    "must be at least 1 (1 = no retry)".into(),
                ));
            }
            builder = builder.max_attempts(n);
        }
        if self.backoff.is_some() || self.initial_delay.is_some() || self.backoff_factor.is_some() {
            let initial = self.initial_delay.unwrap_or(Duration::from_millis(150));
            let kind = self.backoff.unwrap_or(if self.backoff_factor.is_some() {
                BackoffKind::Exponential
            } else {
                BackoffKind::Linear
            });
            if kind == BackoffKind::None && self.initial_delay.is_some() {
                return Err(invalid(
                    "initial_delay",
                    "does not apply to backoff \"none\" (no wait at all)".into(),
                ));
            }
            if let Some(factor) = self.backoff_factor {
                if kind != BackoffKind::Exponential {
                    return Err(invalid(
                        "backoff_factor",
                        "applies only to exponential backoff".into(),
                    ));
                }
                if !(factor >= 1.0 && factor.is_finite()) {
                    return Err(invalid(
                        "backoff_factor",
                        format!("must be a finite number of at least 1 (got {factor})"),
                    ));
                }
            }
            builder = builder.backoff(match kind {
                BackoffKind::None => Backoff::None,
                BackoffKind::Constant => Backoff::Constant(initial),
                BackoffKind::Linear => Backoff::Linear(initial),
                BackoffKind::Exponential => Backoff::Exponential {
                    initial,
                    factor: self.backoff_factor.unwrap_or(2.0),
                },
            });
        }
        if let Some(max) = self.max_delay {
            builder = builder.max_delay(max);
        }
        if let Some(max) = self.max_elapsed {
            // Zero would stop every retry: a typo, not a limit (`max_attempts: 1` says
            // "no retry").
            if max.is_zero() {
                return Err(invalid(
                    "max_elapsed",
                    "must be longer than zero (for no retry, max_attempts = 1)".into(),
                ));
            }
            builder = builder.max_elapsed(max);
        }
        if let Some(jitter) = self.jitter {
            builder = builder.jitter(match jitter {
                JitterConfig::None => Jitter::None,
                JitterConfig::Full => Jitter::Full,
                JitterConfig::Proportional(f) => {
                    if !(0.0..=1.0).contains(&f) {
                        return Err(invalid("jitter", format!("must be within 0..=1 (got {f})")));
                    }
                    Jitter::Proportional(f)
                }
            });
        }
        if let Some(kinds) = &self.retry_on {
            builder = builder.retry_on(kinds.iter().copied().collect::<KindSet>());
        }
        // After retry_on: the failover budget adds the kinds it rides out.
        if let Some(max_outage) = self.failover {
            if max_outage.is_zero() {
                return Err(invalid("failover", "must be longer than zero".into()));
            }
            builder = builder.failover(max_outage);
        }
        builder.build().map_err(|error| {
            let key = match error {
                PolicyError::ZeroAttempts => "max_attempts",
                PolicyError::Factor(_) => "backoff_factor",
                PolicyError::Jitter(_) => "jitter",
                // Blame the key this section set: the other came from the policy below.
                PolicyError::MaxDelayBelowInitial { .. } if self.max_delay.is_none() => {
                    return invalid(
                        "initial_delay",
                        format!("{error} (max_delay from the policy this section is layered over)"),
                    );
                }
                PolicyError::MaxDelayBelowInitial { .. } => "max_delay",
                _ => "",
            };
            invalid(key, error.to_string())
        })
    }
}
