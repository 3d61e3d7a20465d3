//! Sections read from tables only. serde's derive also reads a struct from a list, by
//! position: `agent = [3, "100ms"]` would be `max_attempts = 3, initial_delay = "100ms"`,
//! which no config file means. Each section derives its reading of the keys with
//! `#[serde(remote = "Self")]` (an inherent `deserialize`), and this macro implements
//! `Deserialize` on it, asking the format for a table.

/// `Deserialize` for `$ty`, from a table only, with its derived key reading; `$expecting`
/// names what was expected when the file holds something else there.
macro_rules! table_only {
    ($ty:ty, $expecting:literal) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Table;
                impl<'de> serde::de::Visitor<'de> for Table {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        map: A,
                    ) -> Result<$ty, A::Error> {
                        <$ty>::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    }
                }
                deserializer.deserialize_map(Table)
            }
        }
    };
}
pub(super) use table_only;
