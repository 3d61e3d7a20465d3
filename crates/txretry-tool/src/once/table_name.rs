//! The records' table's name: a plain identifier, or refused.

#[cfg(doc)]
use super::Once;

/// Whether `name` is a plain identifier (`[A-Za-z_][A-Za-z0-9_]{0,62}`).
pub(super) fn is_valid(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=63).contains(&bytes.len())
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// A table name that is not a plain identifier (`[A-Za-z_][A-Za-z0-9_]{0,62}`); see
/// [`Once::table`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid table name {0:?}: use an ASCII letter or '_', then up to 62 ASCII letters, digits or '_'"
)]
pub struct InvalidTableName(String);

impl InvalidTableName {
    /// The refusal of `name`, cut to its first 100 characters.
    pub(super) fn new(name: &str) -> Self {
        InvalidTableName(name.chars().take(100).collect())
    }

    /// The name that was refused (its first 100 characters).
    pub fn name(&self) -> &str {
        &self.0
    }
}
