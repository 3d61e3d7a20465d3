//! A YAML error as a config's author reads it: the field it is in (read from the file, the
//! parser gives only a line and a column), and a message in the file's terms. The library's
//! own messages speak to the programmer calling it (`invalid u32`, `set DuplicateKeyPolicy
//! in Options`); the common ones are said again here, the rest in its user-facing wording.

use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{Budget, Error, Location, MessageFormatter, UserMessageFormatter};

use super::{ConfigError, path};

/// The problem `error` found in `text`, at its place.
pub(super) fn problem(text: &str, error: &Error) -> ConfigError {
    let at = error.location().unwrap_or(Location::UNKNOWN);
    let field = if at == Location::UNKNOWN {
        String::new()
    } else {
        // serde places a visitor's refusal of a value on the value's key; other errors on
        // a key (an unknown one, one given twice) are about the mapping it is in.
        let about_value = matches!(
            original(error),
            Error::SerdeInvalidType { .. }
                | Error::SerdeInvalidValue { .. }
                | Error::SerdeInvalidLength { .. }
                | Error::Message { .. }
        );
        path::at(text, at.line(), at.column(), about_value)
    };
    ConfigError::at(field, at, message(error, scalar_at(text, at)))
}

/// What is wrong; `written` is the plain scalar at the error's place, if one is there.
fn message(error: &Error, written: Option<&str>) -> String {
    match original(error) {
        Error::InvalidScalar { ty, .. } => expected_scalar(ty),
        Error::Unexpected { expected, .. } => match *expected {
            "sequence start" => match written {
                Some(word) => format!("expected a list, e.g. [{word}]"),
                None => "expected a list: [a, b], or one `- item` per line".to_owned(),
            },
            "mapping start" => "expected a mapping: `key: value` lines, or {key: value}".to_owned(),
            "string scalar" => "expected a text".to_owned(),
            other => format!("expected {other}"),
        },
        // serde's "invalid value: integer `0`, expected …", said the other way round, and
        // without quoting a text (the place shows it; it may be a secret put in the wrong
        // key).
        Error::SerdeInvalidType {
            unexpected,
            expected,
            ..
        }
        | Error::SerdeInvalidValue {
            unexpected,
            expected,
            ..
        } => {
            let got = if unexpected.starts_with("string ") {
                "a string"
            } else {
                unexpected
            };
            format!("expected {expected}, got {got}")
        }
        Error::SerdeUnknownVariant {
            variant, expected, ..
        } => format!(
            "unknown value `{variant}`: expected one of {}",
            expected.join(", ")
        ),
        Error::SerdeUnknownField {
            field, expected, ..
        } => format!(
            "unknown key `{field}`: expected one of {}",
            expected.join(", ")
        ),
        Error::SerdeMissingField { field, .. } => format!("`{field}` is missing"),
        Error::DuplicateMappingKey { key: Some(key), .. } => format!("`{key}` is given twice"),
        Error::DuplicateMappingKey { key: None, .. } => "a key is given twice".to_owned(),
        Error::MultipleDocuments { .. } => {
            "a second YAML document starts here: a config is one document (remove the `---`)"
                .to_owned()
        }
        Error::Budget { breach, .. } => too_large(breach),
        other => UserMessageFormatter.format_message(other).into_owned(),
    }
}

/// The error itself, without the source snippet or the alias it was found through.
fn original(error: &Error) -> &Error {
    match error.without_snippet() {
        Error::AliasError { error, .. } => original(error),
        error => error,
    }
}

/// What a scalar of type `ty` (as the parser names it) must be.
fn expected_scalar(ty: &str) -> String {
    let (min, max): (i128, i128) = match ty {
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" => (0, u64::MAX.into()),
        "i8" => (i8::MIN.into(), i8::MAX.into()),
        "i16" => (i16::MIN.into(), i16::MAX.into()),
        "i32" => (i32::MIN.into(), i32::MAX.into()),
        "i64" => (i64::MIN.into(), i64::MAX.into()),
        "floating point" => return "expected a number".to_owned(),
        "boolean" => return "expected true or false".to_owned(),
        other => return format!("not a valid {other}"),
    };
    format!("expected a whole number from {min} to {max}")
}

/// A file past one of the parser's limits (a billion-laughs alias bomb is the usual one):
/// which limit, as the author can act on it.
fn too_large(breach: &BudgetBreach) -> String {
    // The limits of the default options, which the file is read with.
    let limits = Budget::default();
    let limit = match breach {
        BudgetBreach::Nodes { .. } => format!(
            "{} values (each alias counts the values it repeats)",
            limits.max_nodes
        ),
        BudgetBreach::Depth { .. } => format!("{} levels of nesting", limits.max_depth),
        BudgetBreach::Aliases { .. } => format!("{} aliases", limits.max_aliases),
        BudgetBreach::Anchors { .. } => format!("{} anchors", limits.max_anchors),
        BudgetBreach::Events { .. } => format!("{} YAML events", limits.max_events),
        BudgetBreach::ScalarBytes { .. } => {
            format!("{} bytes of text", limits.max_total_scalar_bytes)
        }
        BudgetBreach::AliasAnchorRatio { .. } => format!(
            "{} aliases per anchor",
            limits.alias_anchor_ratio_multiplier
        ),
        _ => return "the file is too large or too complex for a config".to_owned(),
    };
    format!("the file is too large or too complex for a config: it may hold at most {limit}")
}

/// The plain word written at `at` (`support` in `roles: support`), to show the fix with;
/// `None` when something else is there, or something as long as a bearer token (a secret
/// written in the wrong key is not repeated).
fn scalar_at(text: &str, at: Location) -> Option<&str> {
    let line = text
        .lines()
        .nth(usize::try_from(at.line()).ok()?.checked_sub(1)?)?;
    let start = line
        .char_indices()
        .nth(usize::try_from(at.column()).ok()?.checked_sub(1)?)?
        .0;
    let rest = &line[start..];
    let word = rest[..rest.find([',', ']', '}', '#']).unwrap_or(rest.len())].trim();
    let plain = |c: char| c.is_alphanumeric() || "_-.".contains(c);
    let short = (1..16).contains(&word.chars().count());
    (short && word.chars().all(plain)).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The problem of `yaml` read as `T`, as `check` prints it.
    fn problem_of<T: serde::de::DeserializeOwned + std::fmt::Debug>(yaml: &str) -> String {
        let error = serde_saphyr::from_str::<T>(yaml).unwrap_err();
        problem(yaml, &error).to_string()
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Doc {
        n: Option<u64>,
        roles: Option<Vec<String>>,
        kind: Option<Kind>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        String,
        Integer,
    }

    #[test]
    fn library_wording_is_said_in_the_files_terms() {
        assert_eq!(
            problem_of::<Doc>("n: -1\n"),
            "line 1, column 4: n: expected a whole number from 0 to 18446744073709551615"
        );
        assert_eq!(
            problem_of::<Doc>("roles: support\n"),
            "line 1, column 8: roles: expected a list, e.g. [support]"
        );
        assert_eq!(
            problem_of::<Doc>("kind: int\n"),
            "line 1, column 7: kind: unknown value `int`: expected one of string, integer"
        );
        assert_eq!(
            problem_of::<Doc>("n: 1\nn: 2\n"),
            "line 2, column 1: `n` is given twice"
        );
        let two = problem_of::<Doc>("n: 1\n---\nn: 2\n");
        assert!(two.contains("a config is one document"), "{two}");
        assert!(!two.contains("from_str"), "{two}");
    }

    #[test]
    fn a_text_in_the_wrong_key_is_not_repeated() {
        let secret = "abcdefghijklmnopq";
        assert_eq!(
            problem_of::<Doc>(&format!("roles: {secret}\n")),
            "line 1, column 8: roles: expected a list: [a, b], or one `- item` per line"
        );
        let yaml = format!("sources:\n  s:\n    url: sqlite://x\n    max_connections: {secret}\n");
        let errors = crate::config::parse(&yaml, &|_| None).unwrap_err();
        assert_eq!(
            errors[0].to_string(),
            "line 4, column 5: sources.s.max_connections: expected a whole number from 1 to \
             4294967295, got a string"
        );
    }

    #[test]
    fn an_alias_bomb_is_too_large_with_its_limit() {
        let mut yaml = "a: &a [x, x, x, x, x, x, x, x, x]\n".to_owned();
        for (name, below) in ["b", "c", "d", "e", "f", "g"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f"])
        {
            let refs = vec![format!("*{below}"); 9].join(", ");
            yaml.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        let problem = problem_of::<std::collections::HashMap<String, serde_json::Value>>(&yaml);
        assert!(
            problem.contains("the file is too large or too complex for a config: it may hold at most 250000 values"),
            "{problem}"
        );
    }
}
