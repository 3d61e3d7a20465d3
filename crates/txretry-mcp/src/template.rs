//! Message templates (`order {order_id} not found`, `reserved {hold.qty} of {sku}`): text
//! with `{param}` and `{capture.column}` fields; `{{` and `}}` are literal braces.

use serde_json::Value;

use crate::sql::Ref;

/// A template, split at its fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Template {
    parts: Vec<Piece>,
}

#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Field(Ref),
}

impl Template {
    /// Parses `text`; `Err` says what is malformed.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(at) = rest.find(['{', '}']) {
            literal.push_str(&rest[..at]);
            let brace = &rest[at..];
            if brace.starts_with("{{") || brace.starts_with("}}") {
                literal.push_str(&brace[..1]);
                rest = &brace[2..];
                continue;
            }
            // Where the brace is, in characters counted from 1 (as YAML columns are).
            let at = text[..text.len() - brace.len()].chars().count() + 1;
            if brace.starts_with('}') {
                return Err(format!(
                    "a '}}' that closes nothing at character {at} (counting from 1; write '}}}}' for a brace)"
                ));
            }
            let close = brace.find('}').ok_or_else(|| {
                format!(
                    "a '{{' never closed at character {at} (counting from 1; write '{{{{' for a brace)"
                )
            })?;
            let field = brace[1..close].trim();
            let valid = |s: &str| {
                s.chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                    && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            };
            let reference = match field.split_once('.') {
                Some((capture, column)) if valid(capture) && valid(column) => {
                    Ref::Column(capture.to_owned(), column.to_owned())
                }
                None if valid(field) => Ref::Param(field.to_owned()),
                _ => return Err(format!("{{{field}}} is not a parameter or capture.column")),
            };
            if !literal.is_empty() {
                parts.push(Piece::Text(std::mem::take(&mut literal)));
            }
            parts.push(Piece::Field(reference));
            rest = &brace[close + 1..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Piece::Text(literal));
        }
        Ok(Template { parts })
    }

    /// The fields it uses.
    pub fn refs(&self) -> impl Iterator<Item = &Ref> {
        self.parts.iter().filter_map(|piece| match piece {
            Piece::Field(reference) => Some(reference),
            Piece::Text(_) => None,
        })
    }

    /// The text, with each field's value (a string as it is, anything else as JSON; a field
    /// with no value as `null`).
    pub fn render(&self, value_of: impl Fn(&Ref) -> Option<Value>) -> String {
        let mut out = String::new();
        for piece in &self.parts {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Field(reference) => match value_of(reference) {
                    Some(Value::String(text)) => out.push_str(&text),
                    Some(value) => out.push_str(&value.to_string()),
                    None => out.push_str("null"),
                },
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_are_filled_and_braces_escaped() {
        let t = Template::parse("order {order_id} ({o.status}) {{ok}}").unwrap();
        let text = t.render(|r| match r {
            Ref::Param(p) if p == "order_id" => Some(json!(7)),
            Ref::Column(c, col) if c == "o" && col == "status" => Some(json!("open")),
            _ => None,
        });
        assert_eq!(text, "order 7 (open) {ok}");
    }

    #[test]
    fn malformed_templates_say_where() {
        assert!(
            Template::parse("order {id")
                .unwrap_err()
                .contains("never closed")
        );
        assert!(
            Template::parse("a } b")
                .unwrap_err()
                .contains("closes nothing")
        );
        assert_eq!(
            Template::parse("ééééé {order_id").unwrap_err(),
            "a '{' never closed at character 7 (counting from 1; write '{{' for a brace)"
        );
        assert!(
            Template::parse("é }")
                .unwrap_err()
                .contains("at character 3 (counting from 1;")
        );
        assert!(Template::parse("{a.b.c}").is_err());
        assert!(Template::parse("{}").is_err());
    }
}
