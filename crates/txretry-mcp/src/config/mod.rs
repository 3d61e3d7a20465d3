//! The config file: read (`file.rs`; its YAML errors said by `yaml.rs`), checked
//! (`validate/`) into a [`Config`] that the server runs as it is. A config that [`load`]
//! returns has no problem left that can be found without a database (`txretry-mcp check`
//! then prepares every statement on its source).

mod env;
mod error;
mod file;
mod param;
mod path;
mod validate;
mod yaml;

use std::time::Duration;

use indexmap::IndexMap;
use txretry_core::{Isolation, RetryPolicy};

pub use self::error::{ConfigError, ConfigErrors};
pub use self::param::{ParamDecl, ParamKind, SqlValue};
use crate::sql::{Prepared, Statement, Style};
use crate::template::Template;

/// A checked config: what `txretry-mcp serve` serves.
#[derive(Debug)]
pub struct Config {
    /// The databases, by name.
    pub sources: IndexMap<String, Source>,
    /// The policy of tools whose toolset and themselves set none (`defaults.retry`).
    pub default_retry: Option<RetryPolicy>,
    /// The toolsets: name → tool names.
    pub toolsets: IndexMap<String, Vec<String>>,
    /// The tools, in the file's order.
    pub tools: Vec<ToolPlan>,
    /// The bearer tokens of HTTP callers.
    pub tokens: Vec<TokenPlan>,
}

/// A database.
#[derive(Debug)]
pub struct Source {
    /// Its name in the file.
    pub name: String,
    /// Its URL, `${VAR}`s replaced (may hold a password: print [`Source::shown`]).
    pub url: String,
    /// The URL with any password replaced by `***`.
    pub shown: String,
    /// Which database it is.
    pub engine: Engine,
    /// The pool's size.
    pub max_connections: u32,
    /// Where the source is declared, for errors found later (`check`).
    pub field: Located,
}

/// The databases a source can be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// PostgreSQL.
    Postgres,
    /// MySQL or MariaDB.
    MySql,
    /// SQLite.
    Sqlite,
}

impl Engine {
    /// How the database spells positional placeholders.
    pub fn style(self) -> Style {
        match self {
            Engine::Postgres => Style::Dollar,
            Engine::MySql | Engine::Sqlite => Style::Question,
        }
    }
}

/// A field of the file and its place, for problems found after loading.
#[derive(Clone, Debug)]
pub struct Located {
    /// The field's path.
    pub field: String,
    /// Its place.
    pub at: serde_saphyr::Location,
}

impl Located {
    /// A problem with this field.
    pub fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::at(self.field.clone(), self.at, message)
    }
}

/// The most rows one statement of a tool may return, unless the tool or `defaults` says
/// otherwise (`max_rows`): an answer that size is about 100 KB of JSON, well under what the
/// transports carry, and a statement that returns more is almost always missing a bound.
pub const DEFAULT_MAX_ROWS: u32 = 1000;

/// A tool, checked.
#[derive(Clone, Debug)]
pub struct ToolPlan {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The source its transaction runs on.
    pub source: String,
    /// Its parameters, in order.
    pub params: IndexMap<String, ParamDecl>,
    /// Its statements, in order.
    pub statements: Vec<StatementPlan>,
    /// What a call answers.
    pub returns: ReturnsPlan,
    /// Where `returns` is (or the tool, when it is not said).
    pub returns_field: Located,
    /// The isolation level, when set.
    pub isolation: Option<Isolation>,
    /// A read-only transaction.
    pub read_only: bool,
    /// Exactly once, keyed by these parameters.
    pub once: Option<OncePlan>,
    /// Declared idempotent.
    pub idempotent: bool,
    /// A limit on each attempt.
    pub timeout: Option<Duration>,
    /// The most rows one of its statements may return: its own, the defaults', else
    /// [`DEFAULT_MAX_ROWS`].
    pub max_rows: u32,
    /// Its effective policy when it or its toolset sets one (else the defaults apply).
    pub retry: Option<RetryPolicy>,
    /// The roles it is offered to.
    pub roles: Option<Vec<String>>,
}

/// One statement, checked.
#[derive(Clone, Debug)]
pub struct StatementPlan {
    /// The SQL, split at its placeholders.
    pub statement: Statement,
    /// The SQL for the tool's source, placeholders numbered, and what each binds: made once,
    /// when the file is loaded.
    pub prepared: Prepared,
    /// The capture name of its first row.
    pub capture: Option<String>,
    /// Its expectation.
    pub expect: Option<ExpectPlan>,
    /// Where its SQL is.
    pub sql: Located,
}

/// A row-count expectation, checked.
#[derive(Clone, Debug)]
pub struct ExpectPlan {
    /// At least this many rows.
    pub min: u64,
    /// At most this many.
    pub max: u64,
    /// The business error's message when the count is outside.
    pub error: Template,
}

/// What a call answers, checked.
#[derive(Clone, Debug)]
pub enum ReturnsPlan {
    /// Not said: the rows of the last statement that returns rows, or else the count of
    /// each statement.
    Default,
    /// The rows of the last statement that returned rows.
    Rows,
    /// Its first row, or `null`.
    Row,
    /// The count of each statement.
    Affected,
    /// A text.
    Template(Template),
}

/// Exactly once, checked.
#[derive(Clone, Debug)]
pub struct OncePlan {
    /// The parameters whose values are the key.
    pub key: Vec<String>,
    /// The records' table, when not the default one (a valid name: checked).
    pub table: Option<String>,
    /// Where the table is named (`once.table`, or `once` for the default one).
    pub field: Located,
}

/// A bearer token and who it makes its caller.
pub struct TokenPlan {
    /// The token (from the environment, without surrounding white space).
    pub token: String,
    /// The variable it came from, for messages.
    pub env: String,
    /// The caller's roles.
    pub roles: Vec<String>,
    /// The toolset it speaks as.
    pub toolset: Option<String>,
}

impl std::fmt::Debug for TokenPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenPlan")
            .field("env", &self.env)
            .field("roles", &self.roles)
            .field("toolset", &self.toolset)
            .finish_non_exhaustive()
    }
}

/// Reads and checks the config file at `path`, reading `${VAR}`s and tokens with `env`.
///
/// # Errors
/// Every problem found, each with its field and line.
pub fn load(path: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigErrors {
        path: path.to_owned(),
        errors: vec![ConfigError {
            field: String::new(),
            line: None,
            column: None,
            message: format!("cannot read the file: {error}"),
        }],
    })?;
    parse(&text, env).map_err(|errors| ConfigErrors {
        path: path.to_owned(),
        errors,
    })
}

/// Checks a config given as text (see [`load`]).
///
/// # Errors
/// Every problem found.
pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, Vec<ConfigError>> {
    let mut options = serde_saphyr::Options::default();
    // YAML 1.2's booleans only: YAML 1.1's `yes`, `no`, `on`, `off` are refused where they
    // are written, not read as true or false.
    options.strict_booleans = true;
    let file: file::File = serde_saphyr::from_str_with_options(text, options)
        .map_err(|error| vec![yaml::problem(text, &error)])?;
    validate::validate(file, env).map_err(|mut errors| {
        errors.sort_by_key(|error| error.line.unwrap_or(0));
        errors
    })
}
