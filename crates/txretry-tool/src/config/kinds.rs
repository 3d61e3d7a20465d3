//! Transient kinds as a config file names them: `"deadlock"`, `"busy"`, …

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use txretry_core::TransientKind;

/// `Option<Vec<TransientKind>>` from kind names.
pub(super) fn optional<'de, D: Deserializer<'de>>(
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
