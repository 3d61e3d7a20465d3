//! A tool's parameter: its type and limits, the JSON Schema clients are shown, and the check
//! of a call's argument against it (the same rules, so nothing the schema refuses reaches
//! the database).

use std::cmp::Ordering;

use serde::Deserialize;
use serde_json::{Map, Value, json};

/// A parameter as declared.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamDecl {
    /// Its type.
    #[serde(rename = "type")]
    pub kind: ParamKind,
    /// What it means, for the model.
    pub description: Option<String>,
    /// Whether a call must give it (default: yes, unless it has a default).
    pub required: Option<bool>,
    /// Its value when a call leaves it out.
    pub default: Option<Value>,
    /// The only values allowed.
    #[serde(rename = "enum")]
    pub allowed: Option<Vec<Value>>,
    /// The smallest value (numbers) or length (strings).
    pub min: Option<Limit>,
    /// The largest value (numbers) or length (strings).
    pub max: Option<Limit>,
}

/// A `min` or `max` as written: a whole number kept exact (an integer argument is compared
/// with it exactly, past 2^53 too: read as a float, `9007199254740993` became
/// `9007199254740992`), or a number with a fraction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// Written without a fraction or exponent.
    Whole(i128),
    /// Anything else YAML reads as a number (`1.5`, `1e30`, `.nan`).
    Float(f64),
}

impl Limit {
    /// As a float, for comparing with a number argument.
    fn as_f64(self) -> f64 {
        match self {
            Limit::Whole(n) => n as f64,
            Limit::Float(x) => x,
        }
    }

    /// As a whole number within 64 bits, when it is one (a float with no fraction too).
    fn as_i64(self) -> Option<i64> {
        match self {
            Limit::Whole(n) => i64::try_from(n).ok(),
            Limit::Float(x) if is_i64(x) => Some(x as i64),
            Limit::Float(_) => None,
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Whole(n) => write!(f, "{n}"),
            Limit::Float(x) => write!(f, "{x}"),
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Limit;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_i64<E>(self, n: i64) -> Result<Limit, E> {
                Ok(Limit::Whole(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Limit, E> {
                Ok(Limit::Whole(n.into()))
            }
            fn visit_i128<E>(self, n: i128) -> Result<Limit, E> {
                Ok(Limit::Whole(n))
            }
            fn visit_f64<E>(self, x: f64) -> Result<Limit, E> {
                Ok(Limit::Float(x))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The types a parameter can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamKind {
    /// A text.
    String,
    /// A whole number (64-bit).
    Integer,
    /// A number (64-bit float).
    Number,
    /// `true` or `false`.
    Boolean,
}

impl ParamKind {
    /// The JSON Schema type.
    pub fn as_str(self) -> &'static str {
        match self {
            ParamKind::String => "string",
            ParamKind::Integer => "integer",
            ParamKind::Number => "number",
            ParamKind::Boolean => "boolean",
        }
    }
}

/// A value bound to a statement: never spliced into SQL.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    /// A missing optional argument, typed by its declaration so that the database knows
    /// what NULL it is; or (`None`) a captured NULL, which nothing types.
    Null(Option<ParamKind>),
    /// A text.
    Text(String),
    /// A whole number.
    Integer(i64),
    /// A number.
    Number(f64),
    /// A boolean.
    Boolean(bool),
}

impl SqlValue {
    /// The kind of value it is: what it is sent to the database as (`None`: an untyped
    /// NULL).
    pub fn kind(&self) -> Option<ParamKind> {
        match self {
            SqlValue::Null(kind) => *kind,
            SqlValue::Text(_) => Some(ParamKind::String),
            SqlValue::Integer(_) => Some(ParamKind::Integer),
            SqlValue::Number(_) => Some(ParamKind::Number),
            SqlValue::Boolean(_) => Some(ParamKind::Boolean),
        }
    }

    /// As JSON (for templates, keys and answers).
    pub fn to_json(&self) -> Value {
        match self {
            SqlValue::Null(_) => Value::Null,
            SqlValue::Text(text) => Value::from(text.as_str()),
            SqlValue::Integer(n) => Value::from(*n),
            SqlValue::Number(n) => Value::from(*n),
            SqlValue::Boolean(b) => Value::from(*b),
        }
    }
}

impl ParamDecl {
    /// Whether a call must give it.
    pub fn is_required(&self) -> bool {
        self.required.unwrap_or(self.default.is_none())
    }

    /// Checks the declaration itself: the default and the allowed values fit the type and
    /// the limits, the limits make sense (some value can satisfy them). `Err` says what is
    /// wrong, naming the key.
    pub fn check(&self) -> Result<(), String> {
        if self.kind == ParamKind::Boolean && (self.min.is_some() || self.max.is_some()) {
            return Err("a boolean has no min or max".to_owned());
        }
        for (key, limit) in [("min", self.min), ("max", self.max)] {
            let Some(limit) = limit else { continue };
            if !limit.as_f64().is_finite() {
                return Err(format!("{key} must be a finite number"));
            }
            // An integer is compared with its limits exactly, as an i64 (`parse`).
            if self.kind == ParamKind::Integer && limit.as_i64().is_none() {
                return Err(format!(
                    "{key} ({limit}) of an integer must be a whole number from {} to {}",
                    i64::MIN,
                    i64::MAX
                ));
            }
            if self.kind == ParamKind::String && limit.as_i64().is_none_or(|n| n < 0) {
                return Err(format!(
                    "{key} ({limit}) of a string is a length: a whole number, 0 or more"
                ));
            }
        }
        let above = |min: Limit, max: Limit| match (min.as_i64(), max.as_i64()) {
            (Some(min), Some(max)) => min > max,
            _ => min.as_f64() > max.as_f64(),
        };
        if let (Some(min), Some(max)) = (self.min, self.max)
            && above(min, max)
        {
            return Err(format!("min ({min}) is above max ({max})"));
        }
        if let Some(allowed) = &self.allowed {
            if allowed.is_empty() {
                return Err("enum lists no value".to_owned());
            }
            // Against the limits too: a value outside them could never be called with.
            for value in allowed {
                self.parse(value)
                    .map_err(|why| format!("enum value {value}: {why}"))?;
            }
        }
        if let Some(default) = &self.default {
            self.parse(default)
                .map_err(|why| format!("default {default}: {why}"))?;
        }
        Ok(())
    }

    /// The JSON Schema of the parameter.
    pub fn schema(&self) -> Value {
        let mut schema = Map::new();
        schema.insert("type".into(), Value::from(self.kind.as_str()));
        if let Some(description) = &self.description {
            schema.insert("description".into(), Value::from(description.as_str()));
        }
        if let Some(default) = &self.default {
            schema.insert("default".into(), default.clone());
        }
        if let Some(allowed) = &self.allowed {
            schema.insert("enum".into(), Value::from(allowed.clone()));
        }
        let (min_key, max_key) = match self.kind {
            ParamKind::String => ("minLength", "maxLength"),
            _ => ("minimum", "maximum"),
        };
        for (key, limit) in [(min_key, self.min), (max_key, self.max)] {
            if let Some(limit) = limit {
                // Integers' limits and lengths are whole numbers within i64 (`check`).
                let limit = match (self.kind, limit.as_i64()) {
                    (ParamKind::Number, _) | (_, None) => json!(limit.as_f64()),
                    (_, Some(n)) => json!(n),
                };
                schema.insert(key.into(), limit);
            }
        }
        Value::Object(schema)
    }

    /// A call's argument, checked and ready to bind.
    pub fn parse(&self, value: &Value) -> Result<SqlValue, String> {
        let converted = self.convert(value)?;
        if let Some(allowed) = &self.allowed
            && !allowed
                .iter()
                .any(|a| self.convert(a).as_ref() == Ok(&converted))
        {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(format!("must be one of {}", list.join(", ")));
        }
        let unit = match converted {
            SqlValue::Text(_) => " characters long",
            _ => "",
        };
        if let Some(min) = self.min
            && against(&converted, min) == Some(Ordering::Less)
        {
            return Err(format!("must be at least {min}{unit}"));
        }
        if let Some(max) = self.max
            && against(&converted, max) == Some(Ordering::Greater)
        {
            return Err(format!("must be at most {max}{unit}"));
        }
        Ok(converted)
    }

    /// The value as the parameter's type, or why it is not one.
    fn convert(&self, value: &Value) -> Result<SqlValue, String> {
        match self.kind {
            ParamKind::String => value.as_str().map(|s| SqlValue::Text(s.to_owned())),
            // JSON Schema's `integer` is any number without a fraction: `2.0` too (Python
            // hosts send whole floats). Only up to 2^53, where a float is exact: past it, a
            // float may be an integer literal too long for 64 bits, rounded.
            ParamKind::Integer => value
                .as_i64()
                .or_else(|| {
                    value
                        .as_f64()
                        .filter(|x| x.fract() == 0.0 && x.abs() <= TWO_53)
                        .map(|x| x as i64)
                })
                .map(SqlValue::Integer),
            ParamKind::Number => value.as_f64().map(SqlValue::Number),
            ParamKind::Boolean => value.as_bool().map(SqlValue::Boolean),
        }
        .ok_or_else(|| match value.as_f64() {
            // A whole number past 64 bits (JSON reads it as a u64 or a float): an integer
            // all the same, only too large.
            Some(x) if self.kind == ParamKind::Integer && x.fract() == 0.0 && x.abs() >= TWO_63 => {
                format!("must be from {} to {} (64 bits)", i64::MIN, i64::MAX)
            }
            _ => format!("expected {}, got {}", an(self.kind), describe(value)),
        })
    }
}

/// 2^53: every whole float up to it is an exact integer.
const TWO_53: f64 = 9_007_199_254_740_992.0;

/// 2^63, exact as a float (i64::MAX is not): an i64 is in -2^63 .. 2^63.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// Whether `x` is a whole number an i64 holds.
fn is_i64(x: f64) -> bool {
    x.fract() == 0.0 && (-TWO_63..TWO_63).contains(&x)
}

/// How a value's measure (a number, a text's length) compares with a limit; `None` for a
/// value that has none.
fn against(value: &SqlValue, limit: Limit) -> Option<Ordering> {
    match value {
        // Exact: an integer's limits are whole numbers within i64 (`check`).
        SqlValue::Integer(n) => limit.as_i64().map(|limit| n.cmp(&limit)),
        SqlValue::Number(x) => x.partial_cmp(&limit.as_f64()),
        SqlValue::Text(text) => (text.chars().count() as f64).partial_cmp(&limit.as_f64()),
        SqlValue::Null(_) | SqlValue::Boolean(_) => None,
    }
}

fn an(kind: ParamKind) -> &'static str {
    match kind {
        ParamKind::String => "a string",
        ParamKind::Integer => "an integer",
        ParamKind::Number => "a number",
        ParamKind::Boolean => "a boolean",
    }
}

/// A value's JSON type, for error messages (never the whole value: it may be long).
fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(yaml: &str) -> ParamDecl {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn integers_are_checked_against_type_and_limits() {
        let p = param("type: integer\nmin: 1\nmax: 10");
        assert_eq!(p.parse(&json!(3)), Ok(SqlValue::Integer(3)));
        assert_eq!(p.parse(&json!(0)).unwrap_err(), "must be at least 1");
        assert_eq!(p.parse(&json!(11)).unwrap_err(), "must be at most 10");
        assert_eq!(
            p.parse(&json!("3")).unwrap_err(),
            "expected an integer, got a string"
        );
        assert_eq!(
            p.parse(&json!(2.5)).unwrap_err(),
            "expected an integer, got a number"
        );
        assert_eq!(
            p.schema(),
            json!({"type": "integer", "minimum": 1, "maximum": 10})
        );
    }

    #[test]
    fn an_integer_past_64_bits_is_out_of_range() {
        let p = param("type: integer");
        let range = "must be from -9223372036854775808 to 9223372036854775807 (64 bits)";
        assert_eq!(p.parse(&json!(u64::MAX)).unwrap_err(), range);
        let below: Value = serde_json::from_str("-9223372036854775809").unwrap();
        assert_eq!(p.parse(&below).unwrap_err(), range);
        assert_eq!(p.parse(&json!(i64::MIN)), Ok(SqlValue::Integer(i64::MIN)));
        // A whole float is an integer, as JSON Schema has it, while it is exact (2^53).
        assert_eq!(p.parse(&json!(2.0)), Ok(SqlValue::Integer(2)));
        assert_eq!(p.parse(&json!(-2e3)), Ok(SqlValue::Integer(-2000)));
        let exact = 9_007_199_254_740_992.0_f64;
        assert_eq!(p.parse(&json!(exact)), Ok(SqlValue::Integer(1 << 53)));
        assert_eq!(
            p.parse(&json!(exact * 2.0)).unwrap_err(),
            "expected an integer, got a number"
        );
        assert_eq!(p.parse(&json!(9.3e18)).unwrap_err(), range);
    }

    #[test]
    fn integer_limits_are_exact_at_64_bits() {
        let p = param("type: integer\nmax: -9223372036854775808");
        assert!(p.check().is_ok());
        assert_eq!(p.parse(&json!(i64::MIN)), Ok(SqlValue::Integer(i64::MIN)));
        // As floats the two are equal; as integers they are not.
        assert!(p.parse(&json!(i64::MIN + 1)).is_err());
    }

    #[test]
    fn strings_are_limited_by_length_and_enum() {
        let p = param("type: string\nenum: [open, paid]\nmax: 4");
        assert_eq!(p.parse(&json!("open")), Ok(SqlValue::Text("open".into())));
        assert_eq!(
            p.parse(&json!("closed")).unwrap_err(),
            r#"must be one of "open", "paid""#
        );
        let p = param("type: string\nmin: 2");
        assert_eq!(
            p.parse(&json!("é")).unwrap_err(),
            "must be at least 2 characters long"
        );
        assert_eq!(p.schema()["minLength"], 2);
    }

    #[test]
    fn declarations_no_call_can_satisfy_are_refused() {
        let refused = |yaml: &str| param(yaml).check().unwrap_err();
        assert_eq!(
            refused("type: integer\nmin: 1\nenum: [0, 5]"),
            "enum value 0: must be at least 1"
        );
        assert_eq!(
            refused("type: string\nmax: 4\nenum: [open, closed]"),
            "enum value \"closed\": must be at most 4 characters long"
        );
        assert_eq!(
            refused("type: integer\nmin: 1e30"),
            "min (1000000000000000000000000000000) of an integer must be a whole number \
             from -9223372036854775808 to 9223372036854775807"
        );
        assert!(refused("type: integer\nmax: 9223372036854775808").starts_with("max ("));
        assert!(
            refused("type: integer\nmin: 1.2\nmax: 1.8").starts_with("min (1.2) of an integer")
        );
        assert_eq!(
            refused("type: number\nmin: 2.5\nmax: 1.5"),
            "min (2.5) is above max (1.5)"
        );
        // Not a number at all: refused where it is written.
        let nan = serde_saphyr::from_str::<ParamDecl>("type: number\nmax: .nan").unwrap_err();
        assert!(nan.to_string().contains("line 2"), "{nan}");
    }

    /// Whole limits are kept exact: read as floats, 2^53 + 1 became 2^53 and i64::MAX
    /// became 2^63 (then refused as out of range).
    #[test]
    fn integer_limits_are_exact_past_two_to_the_53() {
        let p = param("type: integer\nmax: 9007199254740993");
        assert!(p.check().is_ok());
        assert_eq!(
            p.parse(&json!(9_007_199_254_740_993_i64)),
            Ok(SqlValue::Integer(9_007_199_254_740_993))
        );
        assert_eq!(
            p.parse(&json!(9_007_199_254_740_994_i64)).unwrap_err(),
            "must be at most 9007199254740993"
        );
        assert_eq!(p.schema()["maximum"], json!(9_007_199_254_740_993_i64));
        let p = param("type: integer\nmin: -9223372036854775808\nmax: 9223372036854775807");
        assert!(p.check().is_ok());
        assert_eq!(p.parse(&json!(i64::MAX)), Ok(SqlValue::Integer(i64::MAX)));
    }

    #[test]
    fn declarations_that_cannot_hold_are_refused() {
        assert!(param("type: integer\nmin: 5\nmax: 1").check().is_err());
        assert!(param("type: integer\ndefault: x").check().is_err());
        assert!(param("type: boolean\nmax: 1").check().is_err());
        assert!(param("type: string\nmin: 1.5").check().is_err());
        assert!(param("type: string\nenum: []").check().is_err());
        assert!(
            param("type: integer\nenum: [1, 2]\ndefault: 2")
                .check()
                .is_ok()
        );
    }

    #[test]
    fn a_default_makes_a_parameter_optional_unless_said_otherwise() {
        assert!(param("type: integer").is_required());
        assert!(!param("type: integer\ndefault: 1").is_required());
        assert!(!param("type: integer\nrequired: false").is_required());
    }
}
