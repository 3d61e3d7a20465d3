//! Retry settings read from a file (YAML, TOML, JSON: anything serde reads), per agent and
//! per tool. Unknown keys and invalid values are errors that name the field; nothing is
//! silently dropped.

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use txretry_core::{Backoff, Jitter, KindSet, PolicyError, RetryPolicy, TransientKind};

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
///
/// Durations are a number and a unit (`ns`, `us`, `ms`, `s`, `m`, `h`), possibly several
/// (`"1m 30s"`); a bare number is refused (seconds or milliseconds?). Kinds are
/// `deadlock`, `lock_timeout`, `serialization_failure`, `busy`, `locked`, `connection`.
///
/// The backoff keys go together: when any of `backoff`, `initial_delay` and
/// `backoff_factor` is present, the backoff is rebuilt from them, and the absent ones take
/// the defaults (`linear`, or `exponential` when a factor is given; 150 ms; factor 2).
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
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// Attempts in total, the first included.
    pub max_attempts: Option<u32>,
    /// The backoff curve.
    pub backoff: Option<BackoffKind>,
    /// The first wait (for linear backoff: the step).
    #[serde(default, deserialize_with = "duration")]
    pub initial_delay: Option<Duration>,
    /// The exponential growth factor.
    pub backoff_factor: Option<f64>,
    /// A cap on every wait.
    #[serde(default, deserialize_with = "duration")]
    pub max_delay: Option<Duration>,
    /// A limit on the time spent retrying.
    #[serde(default, deserialize_with = "duration")]
    pub max_elapsed: Option<Duration>,
    /// The jitter.
    pub jitter: Option<JitterConfig>,
    /// The transient kinds retried.
    #[serde(default, deserialize_with = "kinds")]
    pub retry_on: Option<Vec<TransientKind>>,
}

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

/// Jitter in a config file: `"none"`, `"full"`, or a number `f` in 0..=1 (uniform within
/// ± `f` of the wait).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JitterConfig {
    /// `"none"`.
    None,
    /// `"full"`: uniform in 0..=wait.
    Full,
    /// A number: uniform in `wait × (1 ± f)`.
    Proportional(f64),
}

impl<'de> Deserialize<'de> for JitterConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = JitterConfig;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#""none", "full" or a number in 0..=1"#)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<JitterConfig, E> {
                match v {
                    "none" => Ok(JitterConfig::None),
                    "full" => Ok(JitterConfig::Full),
                    _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<JitterConfig, E> {
                if (0.0..=1.0).contains(&v) {
                    Ok(JitterConfig::Proportional(v))
                } else {
                    Err(E::invalid_value(de::Unexpected::Float(v), &self))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<JitterConfig, E> {
                match v {
                    0 => Ok(JitterConfig::Proportional(0.0)),
                    1 => Ok(JitterConfig::Proportional(1.0)),
                    _ => Err(E::invalid_value(de::Unexpected::Unsigned(v), &self)),
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<JitterConfig, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
                }
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// One tool's settings in a config file: the [`PolicyConfig`] keys (layered over the tool's
/// own policy, else the toolbox's), plus `idempotent`, `restart_safe` and `timeout` (a
/// duration per attempt). A section with only the last three keys keeps the policy the
/// tool already had, and its level (`"toolbox"` stays `"toolbox"`).
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// See [`PolicyConfig::max_attempts`].
    pub max_attempts: Option<u32>,
    /// See [`PolicyConfig::backoff`].
    pub backoff: Option<BackoffKind>,
    /// See [`PolicyConfig::initial_delay`].
    #[serde(default, deserialize_with = "duration")]
    pub initial_delay: Option<Duration>,
    /// See [`PolicyConfig::backoff_factor`].
    pub backoff_factor: Option<f64>,
    /// See [`PolicyConfig::max_delay`].
    #[serde(default, deserialize_with = "duration")]
    pub max_delay: Option<Duration>,
    /// See [`PolicyConfig::max_elapsed`].
    #[serde(default, deserialize_with = "duration")]
    pub max_elapsed: Option<Duration>,
    /// See [`PolicyConfig::jitter`].
    pub jitter: Option<JitterConfig>,
    /// See [`PolicyConfig::retry_on`].
    #[serde(default, deserialize_with = "kinds")]
    pub retry_on: Option<Vec<TransientKind>>,
    /// See [`Tool::idempotent`](crate::Tool::idempotent).
    pub idempotent: Option<bool>,
    /// See [`Tool::restart_safe`](crate::Tool::restart_safe).
    pub restart_safe: Option<bool>,
    /// See [`Tool::timeout`](crate::Tool::timeout).
    #[serde(default, deserialize_with = "duration")]
    pub timeout: Option<Duration>,
}

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
        }
    }
}

/// A toolbox's settings in a config file: an optional `agent` policy and a `tools` table,
/// applied with [`ToolboxBuilder::config`](crate::ToolboxBuilder::config).
///
/// ```toml
/// [agent]
/// max_attempts = 3
/// initial_delay = "100ms"
/// backoff = "exponential"
/// jitter = "full"
///
/// [tools.transfer]
/// max_attempts = 5
/// timeout = "2s"
///
/// [tools.get_order]
/// idempotent = true
/// ```
///
/// Read it with [`from_deserializer`](ToolboxConfig::from_deserializer) to get errors
/// that name the field's full path (`tools.transfer.timeout`); it also implements
/// `Deserialize` for embedding in your own config type.
///
/// ```
/// use txretry_tool::ToolboxConfig;
///
/// let err = ToolboxConfig::from_json(r#"{ "tools": { "transfer": { "max_attempt": 5 } } }"#).unwrap_err();
/// assert_eq!(err.field(), "tools.transfer.max_attempt");
/// let err = ToolboxConfig::from_json(r#"{ "agent": { "initial_delay": "150" } }"#).unwrap_err();
/// assert_eq!(err.field(), "agent.initial_delay");
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolboxConfig {
    /// The toolbox's (agent-level) policy.
    pub agent: Option<PolicyConfig>,
    /// Per tool, by name.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolConfig>,
}

impl ToolboxConfig {
    /// Reads a config from any serde deserializer (`toml::Deserializer::parse(text)?`,
    /// `&mut serde_json::Deserializer::from_str(text)`, `serde_yaml::Deserializer::from_str(text)`)
    /// and checks its values. Errors name the field's full path.
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<ToolboxConfig, ConfigError> {
        let config: ToolboxConfig =
            serde_path_to_error::deserialize(deserializer).map_err(|error| {
                let field = error.path().to_string();
                ConfigError::new(
                    ConfigErrorKind::Invalid,
                    if field == "." { String::new() } else { field },
                    error.into_inner().to_string(),
                )
            })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads a config from JSON text.
    pub fn from_json(text: &str) -> Result<ToolboxConfig, ConfigError> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let config = ToolboxConfig::from_deserializer(&mut deserializer)?;
        deserializer.end().map_err(|e| {
            ConfigError::new(ConfigErrorKind::Invalid, String::new(), e.to_string())
        })?;
        Ok(config)
    }

    /// Checks every value on its own (against the defaults); what depends on the tools is
    /// checked when the toolbox is built.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        if let Some(agent) = &self.agent {
            agent.build_on(&RetryPolicy::default(), "agent")?;
        }
        for (name, tool) in &self.tools {
            let field = format!("tools.{name}");
            tool.policy().build_on(&RetryPolicy::default(), &field)?;
            if tool.timeout == Some(Duration::ZERO) {
                return Err(ConfigError::invalid(
                    &field,
                    "timeout",
                    "must be longer than zero",
                ));
            }
        }
        Ok(())
    }
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
        builder.build().map_err(|error| {
            let key = match error {
                PolicyError::ZeroAttempts => "max_attempts",
                PolicyError::Factor(_) => "backoff_factor",
                PolicyError::Jitter(_) => "jitter",
                PolicyError::MaxDelayBelowInitial { .. } => "max_delay",
                _ => "",
            };
            invalid(key, error.to_string())
        })
    }
}

/// What was wrong with a config.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigErrorKind {
    /// An unknown key, a value of the wrong type or out of range, unreadable text.
    Invalid,
    /// A `tools.<name>` section names a tool the toolbox does not have.
    UnknownTool,
}

/// A config that could not be used, with the field it is about.
///
/// ```
/// use txretry_tool::ToolboxConfig;
///
/// let err = ToolboxConfig::from_json(r#"{ "agent": { "jitter": 2 } }"#).unwrap_err();
/// assert_eq!(err.field(), "agent.jitter");
/// assert!(err.to_string().starts_with("agent.jitter: "));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    kind: ConfigErrorKind,
    field: String,
    message: String,
}

impl ConfigError {
    fn new(kind: ConfigErrorKind, field: String, message: String) -> Self {
        ConfigError {
            kind,
            field,
            message,
        }
    }

    fn invalid(prefix: &str, key: &str, message: impl Into<String>) -> Self {
        let field = match (prefix.is_empty(), key.is_empty()) {
            (true, _) => key.to_owned(),
            (false, true) => prefix.to_owned(),
            (false, false) => format!("{prefix}.{key}"),
        };
        ConfigError::new(ConfigErrorKind::Invalid, field, message.into())
    }

    pub(crate) fn unknown_tool(name: &str) -> Self {
        ConfigError::new(
            ConfigErrorKind::UnknownTool,
            format!("tools.{name}"),
            "no tool of this name is registered".to_owned(),
        )
    }

    /// What kind of problem it is.
    pub fn kind(&self) -> ConfigErrorKind {
        self.kind
    }

    /// The field's path, such as `tools.transfer.initial_delay` (empty when the text itself
    /// could not be read).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong with it.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "invalid config: {}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl Error for ConfigError {}

/// `Option<Duration>` from a string such as `"150ms"`.
fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = Duration;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(r#"a duration such as "150ms" or "2s""#)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            parse_duration(v)
                .map_err(|why| E::custom(format_args!("invalid duration {v:?}: {why}")))
        }
    }
    deserializer.deserialize_str(V).map(Some)
}

/// `Option<Vec<TransientKind>>` from kind names.
fn kinds<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<TransientKind>>, D::Error> {
    struct Kind(TransientKind);
    impl<'de> Deserialize<'de> for Kind {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Kind;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("one of ")?;
                    for (i, kind) in TransientKind::ALL.iter().enumerate() {
                        if i > 0 {
                            f.write_str(", ")?;
                        }
                        write!(f, "{:?}", kind.as_str())?;
                    }
                    Ok(())
                }
                fn visit_str<E: de::Error>(self, v: &str) -> Result<Kind, E> {
                    TransientKind::ALL
                        .into_iter()
                        .find(|kind| kind.as_str() == v)
                        .map(Kind)
                        .ok_or_else(|| E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
            deserializer.deserialize_str(V)
        }
    }
    let kinds = Vec::<Kind>::deserialize(deserializer)?;
    Ok(Some(kinds.into_iter().map(|k| k.0).collect()))
}

/// Parses `"150ms"`, `"2s"`, `"1.5s"`, `"1m 30s"`: one or more numbers, each with a unit
/// (`ns`, `us`/`µs`, `ms`, `s`, `m`/`min`, `h`). Exact (integer nanoseconds); never panics.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err("empty".to_owned());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        if number.is_empty() {
            return Err("expected a number".to_owned());
        }
        rest = rest[number_end..].trim_start();
        let unit_end = rest
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = rest[unit_end..].trim_start();
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" | "sec" | "secs" => 1_000_000_000,
            "m" | "min" | "mins" => 60_000_000_000,
            "h" | "hr" | "hrs" => 3_600_000_000_000,
            "" => return Err(format!("{number} needs a unit (ns, us, ms, s, m, h)")),
            other => return Err(format!("unknown unit {other:?} (use ns, us, ms, s, m, h)")),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(format!("{number:?} is not a number"));
        }
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| "number too large".to_owned())?
        };
        let mut nanos = whole
            .checked_mul(unit_nanos)
            .ok_or_else(|| "too long".to_owned())?;
        // Only the digits that can matter at nanosecond precision.
        let mut scale = unit_nanos;
        for digit in fraction.bytes() {
            scale /= 10;
            nanos += u128::from(digit - b'0') * scale;
        }
        total = total
            .checked_add(nanos)
            .ok_or_else(|| "too long".to_owned())?;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| "too long".to_owned())?;
    let subsec = u32::try_from(total % 1_000_000_000).unwrap_or(0);
    Ok(Duration::new(secs, subsec))
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_parse_exactly() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("150ms"), Ok(ms(150)));
        assert_eq!(parse_duration("2s"), Ok(ms(2000)));
        assert_eq!(parse_duration(" 1.5s "), Ok(ms(1500)));
        assert_eq!(parse_duration("0.15s"), Ok(ms(150)));
        assert_eq!(parse_duration("1m 30s"), Ok(ms(90_000)));
        assert_eq!(parse_duration("1m30s"), Ok(ms(90_000)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration(".5s"), Ok(ms(500)));
    }

    #[test]
    fn bad_durations_are_refused_without_panicking() {
        for bad in [
            "",
            "150",
            "ms",
            "1.2.3s",
            "5 parsecs",
            "-1s",
            "1e3ms",
            ".s",
            "99999999999999999999999h",
            "1s 2",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
