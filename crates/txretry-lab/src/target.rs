//! What `--db` names: an embedded SQLite file, an SQLite path, or a Postgres / MySQL
//! server; and how to show it without its password.

use std::fmt;

use txretry::sqlx::database_url::{self, Engine, SchemeError};
use txretry::sqlx::redact::{passwords_in, redact_url, scrub};

/// The database a run goes to.
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// A fresh SQLite file in a temporary directory, removed at exit.
    EmbeddedSqlite,
    /// An SQLite URL (`sqlite://path`, `sqlite:path`, `sqlite::memory:`).
    Sqlite(String),
    /// A `postgres://` or `postgresql://` URL.
    Postgres(String),
    /// A `mysql://` or `mariadb://` URL.
    MySql(String),
}

/// Why a `--db` value names no database the lab can run on. Its message never contains
/// the value (it may hold a password).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// `sqlite://` without a path.
    #[error("an sqlite URL needs a path, e.g. sqlite://lab.db (or plain `sqlite` for a temp file)")]
    SqliteNeedsPath,
    /// A scheme the lab does not know, or one written without its `//`.
    #[error("{}", with_hint(.0))]
    Scheme(#[from] SchemeError),
    /// Several servers (`--processes`, one per process) of different engines.
    #[error("the servers in --db are of different databases ({0} and {1}): list servers of one")]
    MixedEngines(&'static str, &'static str),
}

/// An engine's short name, as [`Target::engine`] gives it.
fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Sqlite => "sqlite",
        Engine::Postgres => "postgres",
        Engine::MySql => "mysql",
    }
}

/// `error`, and where it lists what the lab takes, the lab's own default too.
fn with_hint(error: &SchemeError) -> String {
    match error {
        SchemeError::NoSlashes(_) => error.to_string(),
        _ => format!("{error} (or plain `sqlite`: a temp file)"),
    }
}

impl Target {
    /// Reads a `--db` value. The error never contains the value itself (it may hold a
    /// password).
    pub fn parse(text: &str) -> Result<Target, TargetError> {
        let trimmed = text.trim();
        if trimmed.eq_ignore_ascii_case("sqlite") {
            return Ok(Target::EmbeddedSqlite);
        }
        let url = trimmed.to_owned();
        let engines = servers(trimmed)
            .into_iter()
            .map(database_url::engine)
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(other) = engines.iter().find(|&&e| e != engines[0]) {
            return Err(TargetError::MixedEngines(
                engine_name(engines[0]),
                engine_name(*other),
            ));
        }
        Ok(match database_url::engine(trimmed)? {
            Engine::Sqlite => {
                let lower = trimmed.to_ascii_lowercase();
                if lower.trim_end_matches('/') == "sqlite:" {
                    return Err(TargetError::SqliteNeedsPath);
                }
                Target::Sqlite(database_url::for_sqlx(trimmed).into_owned())
            }
            Engine::Postgres => Target::Postgres(url),
            Engine::MySql => Target::MySql(url),
        })
    }

    /// The engine's short name: `sqlite`, `postgres` or `mysql`.
    pub fn engine(&self) -> &'static str {
        match self {
            Target::EmbeddedSqlite | Target::Sqlite(_) => "sqlite",
            Target::Postgres(_) => "postgres",
            Target::MySql(_) => "mysql",
        }
    }

    /// Whether the engine is SQLite.
    pub fn is_sqlite(&self) -> bool {
        self.engine() == "sqlite"
    }

    /// The URL as given (with its password): only for connecting, never for printing.
    pub fn raw_url(&self) -> Option<&str> {
        match self {
            Target::EmbeddedSqlite => None,
            Target::Sqlite(url) | Target::Postgres(url) | Target::MySql(url) => Some(url),
        }
    }

    /// Secrets to mask in anything printed about this target.
    pub fn secrets(&self) -> Vec<String> {
        self.raw_url()
            .map(|url| servers(url).into_iter().flat_map(passwords_in).collect())
            .unwrap_or_default()
    }

    /// `text` with every secret of this target (and every URL password) masked.
    pub fn scrub(&self, text: &str) -> String {
        scrub(text, &self.secrets())
    }
}

/// The servers a `--db` URL names: several servers of one cluster may be given
/// comma-separated (`mysql://node1/test,mysql://node2/test`, for `txretry-bench run --processes`: process `i`
/// connects to server `i` mod their number). A comma not followed by `scheme://` is part
/// of the URL.
pub fn servers(url: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut start = 0;
    for (comma, _) in url.match_indices(',') {
        let next = &url[comma + 1..];
        let starts_url = next.split_once("://").is_some_and(|(scheme, _)| {
            !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphanumeric())
        });
        if starts_url {
            found.push(&url[start..comma]);
            start = comma + 1;
        }
    }
    found.push(&url[start..]);
    found
}

/// Shows the target with its password redacted.
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.raw_url() {
            None => f.write_str("sqlite (temp file)"),
            Some(url) => {
                let shown: Vec<String> = servers(url).into_iter().map(redact_url).collect();
                f.write_str(&scrub(&shown.join(","), &self.secrets()))
            }
        }
    }
}

/// Same as `Display`: a `Debug` print must not leak the password either.
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({self})")
    }
}
