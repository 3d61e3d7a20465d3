//! A config that could not be used, and the field it is about.

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
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", heading(.field))]
pub struct ConfigError {
    kind: ConfigErrorKind,
    field: String,
    message: String,
}

/// The longest message kept, in characters: a format's error may quote a whole value or
/// line, which can be megabytes long.
const MAX_MESSAGE: usize = 500;

/// The longest field path kept, in characters: a tool's name is a map key, as long as the
/// file makes it.
const MAX_FIELD: usize = 200;

/// `text` cut to its first `max` characters, then `…`.
fn bounded(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

impl ConfigError {
    pub(super) fn new(kind: ConfigErrorKind, field: String, message: String) -> Self {
        // A syntax error has no field: the path stops at the value it was in
        // (serde_path_to_error ends it with `?`, as in `agent.?`).
        let field = match field
            .find(".?")
            .or_else(|| field.strip_prefix('?').map(|_| 0))
        {
            Some(end) => field[..end].to_owned(),
            None => field,
        };
        let message = without_path(&field, &message);
        let message = bounded(message, MAX_MESSAGE);
        let field = bounded(&field, MAX_FIELD);
        ConfigError {
            kind,
            field,
            message,
        }
    }

    pub(super) fn invalid(prefix: &str, key: &str, message: impl Into<String>) -> Self {
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

/// What a [`ConfigError`]'s message follows: the field, or `invalid config` when the text
/// itself could not be read.
fn heading(field: &str) -> &str {
    if field.is_empty() {
        "invalid config"
    } else {
        field
    }
}

/// `message` without the path some formats (YAML) put before it: the error already names
/// the field, in full.
fn without_path<'m>(field: &str, message: &'m str) -> &'m str {
    match message.split_once(": ") {
        Some((path, rest))
            if !path.is_empty()
                && (field == path
                    || field.starts_with(&format!("{path}."))
                    || field.starts_with(&format!("{path}["))) =>
        {
            rest
        }
        _ => message,
    }
}

#[cfg(test)]
mod tests {
    use super::without_path;

    #[test]
    fn a_path_the_field_already_names_is_dropped() {
        let field = "agent.max_attempts";
        assert_eq!(
            without_path(field, "agent.max_attempts: invalid type"),
            "invalid type"
        );
        assert_eq!(
            without_path("agent.x0", "agent: unknown field `x0`"),
            "unknown field `x0`"
        );
        assert_eq!(
            without_path("agent.retry_on[1]", "agent.retry_on: bad"),
            "bad"
        );
        // Anything else stays.
        assert_eq!(without_path(field, "agents: invalid"), "agents: invalid");
        assert_eq!(
            without_path(field, "must be at least 1"),
            "must be at least 1"
        );
        assert_eq!(without_path("", "x: y"), "x: y");
    }
}
