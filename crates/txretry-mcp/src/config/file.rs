//! The config file as written: what serde reads from the YAML, with the line and column of
//! every value a later check may have to point at. Nothing here is checked beyond its type;
//! `validate.rs` does the rest.

use std::fmt;
use std::time::Duration;

use indexmap::IndexMap;
use serde::de::{self, Unexpected, Visitor};
use serde::{Deserialize, Deserializer};
use serde_saphyr::Spanned;
use txretry_tool::PolicyConfig;

use super::param::ParamDecl;

/// A whole `tools.yaml`. Top-level keys that begin with `x-` are the author's own (as in a
/// Compose file): a place for anchors the rest of the file aliases, read and set aside.
#[derive(Debug)]
pub struct File {
    /// The databases, by name.
    pub sources: IndexMap<String, Spanned<SourceDecl>>,
    /// What every tool gets unless its toolset or itself says otherwise.
    pub defaults: Defaults,
    /// Named groups of tools: what a caller speaking as that toolset is offered.
    pub toolsets: IndexMap<String, Spanned<ToolsetDecl>>,
    /// The tools, by name.
    pub tools: IndexMap<String, Spanned<ToolDecl>>,
    /// Who may call over HTTP.
    pub auth: AuthDecl,
}

/// The top-level keys, as a refusal of another lists them.
const FILE_KEYS: &[&str] = &["sources", "defaults", "toolsets", "tools", "auth"];

impl<'de> Deserialize<'de> for File {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FileVisitor)
    }
}

/// [`File`]'s keys, as serde's derive would read them (each once, unknown ones refused),
/// but for the `x-` ones.
struct FileVisitor;

impl<'de> Visitor<'de> for FileVisitor {
    type Value = File;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping with sources and tools")
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<File, A::Error> {
        fn once<'de, A: de::MapAccess<'de>, T: Deserialize<'de>>(
            slot: &mut Option<T>,
            map: &mut A,
            key: &'static str,
        ) -> Result<(), A::Error> {
            if slot.is_some() {
                return Err(de::Error::duplicate_field(key));
            }
            *slot = Some(map.next_value()?);
            Ok(())
        }
        let (mut sources, mut defaults, mut toolsets, mut tools, mut auth) =
            (None, None, None, None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "sources" => once(&mut sources, &mut map, "sources")?,
                "defaults" => once(&mut defaults, &mut map, "defaults")?,
                "toolsets" => once(&mut toolsets, &mut map, "toolsets")?,
                "tools" => once(&mut tools, &mut map, "tools")?,
                "auth" => once(&mut auth, &mut map, "auth")?,
                own if own.starts_with("x-") => {
                    map.next_value::<de::IgnoredAny>()?;
                }
                other => return Err(de::Error::unknown_field(other, FILE_KEYS)),
            }
        }
        Ok(File {
            sources: sources.ok_or_else(|| de::Error::missing_field("sources"))?,
            defaults: defaults.unwrap_or_default(),
            toolsets: toolsets.unwrap_or_default(),
            tools: tools.ok_or_else(|| de::Error::missing_field("tools"))?,
            auth: auth.unwrap_or_default(),
        })
    }
}

/// A database.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceDecl {
    /// `sqlite://PATH`, `postgres://…` (multi-host too), `mysql://…`; `${VAR}` is replaced by
    /// the environment variable `VAR`.
    pub url: Spanned<String>,
    /// The pool's size (1 or more).
    #[serde(default, deserialize_with = "positive")]
    pub max_connections: Option<u32>,
}

/// The `defaults` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// The retry policy of every tool whose toolset and itself set none.
    pub retry: Option<Spanned<PolicyConfig>>,
    /// The limit on each attempt of every tool that sets none.
    #[serde(default, with = "duration")]
    pub timeout: Option<Spanned<Duration>>,
    /// The most rows a statement of every tool that sets none may return.
    #[serde(default, deserialize_with = "positive")]
    pub max_rows: Option<u32>,
}

/// A toolset.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsetDecl {
    /// Its tools.
    pub tools: Vec<Spanned<String>>,
    /// The retry policy of its tools that set none.
    pub retry: Option<Spanned<PolicyConfig>>,
}

/// A tool: a transaction of one or more statements.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDecl {
    /// The source its transaction runs on.
    pub source: Spanned<String>,
    /// What the tool does, for the model.
    pub description: String,
    /// Its arguments, in the order shown to clients.
    #[serde(default)]
    pub parameters: IndexMap<String, Spanned<ParamDecl>>,
    /// The statements, run in order in one transaction.
    pub statements: Vec<Spanned<StatementDecl>>,
    /// What a call answers.
    #[serde(default)]
    pub returns: Option<Spanned<Returns>>,
    /// The transaction's isolation level (Postgres, MySQL; SQLite is always serializable).
    pub isolation: Option<Spanned<IsolationDecl>>,
    /// A server-enforced read-only transaction.
    #[serde(default)]
    pub read_only: bool,
    /// Exactly once per key.
    pub once: Option<Spanned<OnceDecl>>,
    /// Running it twice has the effect of running it once.
    #[serde(default)]
    pub idempotent: bool,
    /// A limit on each attempt.
    #[serde(default, with = "duration")]
    pub timeout: Option<Spanned<Duration>>,
    /// The most rows one of its statements may return.
    #[serde(default, deserialize_with = "positive")]
    pub max_rows: Option<u32>,
    /// Its own retry policy.
    pub retry: Option<Spanned<PolicyConfig>>,
    /// Only callers with one of these roles are offered it.
    pub roles: Option<Vec<String>>,
}

/// One statement of a tool.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatementDecl {
    /// The SQL, with `:param` and `:capture.column` placeholders.
    pub sql: Spanned<String>,
    /// Keeps the first row under this name, for later statements, templates and `returns`.
    pub capture: Option<Spanned<String>>,
    /// What the statement must have done, else the call ends with a business error.
    pub expect: Option<Spanned<ExpectDecl>>,
}

/// An expectation on a statement's row count (rows returned, or rows affected).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectDecl {
    /// Exactly this many.
    pub rows: Option<u64>,
    /// At least this many.
    pub min_rows: Option<u64>,
    /// At most this many.
    pub max_rows: Option<u64>,
    /// The business error's message, a template (`order {order_id} not found`).
    pub error: Spanned<String>,
}

/// What a call answers.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Returns {
    /// The rows of the last statement that returned rows, as an array of objects.
    Rows,
    /// The first row of the last statement that returned rows, or `null`.
    Row,
    /// The rows each statement affected or returned, as an array of numbers.
    Affected,
    /// A text, from a template over the arguments and the captures.
    Template(Spanned<String>),
}

/// An isolation level.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsolationDecl {
    /// READ UNCOMMITTED.
    ReadUncommitted,
    /// READ COMMITTED.
    ReadCommitted,
    /// REPEATABLE READ.
    RepeatableRead,
    /// SERIALIZABLE.
    Serializable,
}

/// Exactly once: the arguments that make a call unique.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnceDecl {
    /// The parameters whose values form the key (a key the client sends is one of them).
    pub key: Vec<Spanned<String>>,
    /// The records' table (`txretry_tool_calls` by default).
    pub table: Option<Spanned<String>>,
}

/// The `auth` section: bearer tokens for HTTP callers.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthDecl {
    /// Each token a caller may present, and who it makes the caller.
    #[serde(default)]
    pub tokens: Vec<Spanned<TokenDecl>>,
}

/// One bearer token.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenDecl {
    /// The environment variable holding the token (never the token itself).
    pub env: Spanned<String>,
    /// The roles of a caller presenting it.
    #[serde(default)]
    pub roles: Vec<String>,
    /// The toolset such a caller speaks as: offered only its tools.
    pub toolset: Option<Spanned<String>>,
}

/// `max_connections`, `max_rows`: a whole number from 1, refused otherwise with the range it
/// must be in.
fn positive<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    struct Positive;
    impl Visitor<'_> for Positive {
        type Value = u32;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "a whole number from 1 to {}", u32::MAX)
        }

        fn visit_u64<E: de::Error>(self, n: u64) -> Result<u32, E> {
            u32::try_from(n)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| E::invalid_value(Unexpected::Unsigned(n), &self))
        }

        fn visit_i64<E: de::Error>(self, n: i64) -> Result<u32, E> {
            let n = u64::try_from(n).map_err(|_| E::invalid_value(Unexpected::Signed(n), &self))?;
            self.visit_u64(n)
        }
    }
    deserializer.deserialize_any(Positive).map(Some)
}

/// Durations as humans write them (`5s`, `250ms`, `1m 30s`; humantime's grammar, a bare
/// number refused), keeping their place.
mod duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};
    use serde_saphyr::Spanned;

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Spanned<Duration>>, D::Error> {
        let text = Spanned::<String>::deserialize(deserializer)?;
        let parsed = humantime::parse_duration(&text.value).map_err(|why| {
            let text = text.value.trim();
            // humantime says "time unit needed, for example 5sec or 5ms"; `sec` reads oddly
            // next to the README's `5s`.
            if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '.') {
                serde::de::Error::custom(format_args!(
                    "a duration needs a unit: `{text}s`, `{text}ms`, `1m 30s`"
                ))
            } else {
                serde::de::Error::custom(format_args!("invalid duration {text:?}: {why}"))
            }
        })?;
        Ok(Some(Spanned::new(parsed, text.referenced, text.defined)))
    }
}
