//! A toolbox's config file: the `agent` policy and the `tools` table.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use txretry_core::{Backoff, RetryPolicy};

use super::{ConfigError, ConfigErrorKind, PolicyConfig, ToolConfig};

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
#[serde(deny_unknown_fields, remote = "Self")]
pub struct ToolboxConfig {
    /// The toolbox's (agent-level) policy.
    pub agent: Option<PolicyConfig>,
    /// Per tool, by name.
    #[serde(default, deserialize_with = "no_duplicates")]
    pub tools: BTreeMap<String, ToolConfig>,
}

super::table::table_only!(ToolboxConfig, "a table with `agent` and `tools`");

impl ToolboxConfig {
    /// Reads a config from any serde deserializer (`toml::Deserializer::parse(text)?`,
    /// `&mut serde_json::Deserializer::from_str(text)`) and checks its values. Errors name
    /// the field's full path.
    ///
    /// For YAML, read it with serde-saphyr, whose errors give the line and column; the
    /// values are then checked when the builder takes the config
    /// ([`ToolboxBuilder::config`](crate::ToolboxBuilder::config)):
    ///
    /// ```
    /// use txretry_tool::{Toolbox, ToolboxConfig};
    ///
    /// let yaml = "agent:\n  max_attempts: 3\ntools:\n  transfer:\n    timeout: 2s\n";
    /// let config: ToolboxConfig = serde_saphyr::from_str(yaml).unwrap();
    /// Toolbox::builder().config(config).unwrap();
    ///
    /// let typo = "tools:\n  transfer:\n    max_attempt: 5\n";
    /// let err = serde_saphyr::from_str::<ToolboxConfig>(typo).unwrap_err();
    /// assert!(err.to_string().contains("line 3"), "{err}");
    /// let zero = serde_saphyr::from_str("agent:\n  max_attempts: 0\n").unwrap();
    /// let err = Toolbox::builder().config(zero).unwrap_err();
    /// assert_eq!(err.field(), "agent.max_attempts");
    /// ```
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

    /// Checks every section on its own; how a section combines with the policy it is layered
    /// over (a `max_delay` below that policy's first wait) is checked when the toolbox is
    /// built, once the tools' own policies are known.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        // No backoff below: a section's waits conflict only with its own keys here.
        let neutral = RetryPolicy::builder()
            .backoff(Backoff::None)
            .build()
            .expect("the default policy without backoff is valid");
        if let Some(agent) = &self.agent {
            agent.build_on(&neutral, "agent")?;
        }
        for (name, tool) in &self.tools {
            let field = format!("tools.{name}");
            tool.policy().build_on(&neutral, &field)?;
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

/// The `tools` table, refusing a tool's section given twice (JSON and YAML maps allow it,
/// and a map would keep the last one silently); null is an empty table.
fn no_duplicates<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, ToolConfig>, D::Error> {
    struct Sections;
    impl<'de> Visitor<'de> for Sections {
        type Value = BTreeMap<String, ToolConfig>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of tool sections")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut sections = BTreeMap::new();
            while let Some(name) = map.next_key::<String>()? {
                if sections.contains_key(&name) {
                    return Err(de::Error::custom(format_args!(
                        "the section of tool {name:?} is given twice"
                    )));
                }
                let section = map.next_value()?;
                sections.insert(name, section);
            }
            Ok(sections)
        }
    }
    // An empty `tools:` (YAML's null, as commenting out every tool leaves it; JSON's
    // `null`) is no sections, as an empty `agent:` is no policy.
    struct Optional;
    impl<'de> Visitor<'de> for Optional {
        type Value = BTreeMap<String, ToolConfig>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a table of tool sections")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_map(Sections)
        }
    }
    deserializer.deserialize_option(Optional)
}
