//! A business error, as a `once` call records it and replays it.

use std::error::Error;

use txretry_core::Code;

/// A business error, as a `once` tool records it and as every call with its key gets it
/// back: a `kind` (a short code for programs) and a `message` (for the model). Its
/// `Display` is the message.
///
/// Return it (converted into your closure's error type, e.g. `BoxError` or `anyhow::Error`)
/// from the closure of [`ToolContext::once`](crate::ToolContext#method.once) to choose the kind;
/// any other error the policy judges permanent is recorded with the kind taken from its
/// database code (`SQLSTATE 23505`, `MySQL error 1062`, …) or `error`, and its `Display` as
/// the message.
///
/// ```
/// use txretry_tool::{BoxError, BusinessError};
///
/// let refusal: BoxError = BusinessError::new("out_of_stock", "only 3 left").into();
/// assert_eq!(refusal.to_string(), "only 3 left");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{message}")]
pub struct BusinessError {
    kind: String,
    message: String,
}

impl BusinessError {
    /// A business error with this kind and message.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        BusinessError {
            kind: kind.into(),
            message: message.into(),
        }
    }

    /// The kind: what the closure's [`BusinessError`] said, else the database code of the
    /// error, else `error`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What a `once` call records for `error`, which the policy judged permanent (its
    /// code, if any, is `code`).
    #[cfg_attr(not(once_records), allow(dead_code))]
    pub(crate) fn from_error(error: &(dyn Error + 'static), code: Option<Code>) -> Self {
        let mut link = Some(error);
        for _ in 0..64 {
            let Some(current) = link else { break };
            if let Some(business) = current.downcast_ref::<BusinessError>() {
                return business.clone();
            }
            link = current.source();
        }
        BusinessError {
            kind: code.map_or_else(|| "error".to_owned(), |code| code.to_string()),
            message: crate::error_text::with_causes(error),
        }
    }

    /// The error with every NUL in its kind and message replaced by U+FFFD, which every
    /// database's text columns take.
    #[cfg_attr(not(once_records), allow(dead_code))]
    pub(crate) fn without_nul(self) -> Self {
        let clean = |text: String| {
            if text.contains('\0') {
                text.replace('\0', "\u{FFFD}")
            } else {
                text
            }
        };
        BusinessError {
            kind: clean(self.kind),
            message: clean(self.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::BusinessError;

    #[test]
    fn business_errors_keep_their_kind() {
        let boxed: Box<dyn Error + Send + Sync> =
            BusinessError::new("gone", "no such order").into();
        let found = BusinessError::from_error(&*boxed, None);
        assert_eq!(found, BusinessError::new("gone", "no such order"));
        let other = std::io::Error::other("refused");
        let found = BusinessError::from_error(&other, None);
        assert_eq!((found.kind(), found.message()), ("error", "refused"));
    }
}
