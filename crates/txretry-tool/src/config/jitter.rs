//! Jitter as a config file writes it.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

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
