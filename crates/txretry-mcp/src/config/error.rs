//! What is wrong with a config file: each problem with the field it is in and its line.

use std::fmt;

use serde_saphyr::Location;

/// One problem in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The field, as a path (`tools.cancel_order.statements[0].sql`); empty for the file.
    pub field: String,
    /// The line (1-based), when known.
    pub line: Option<u64>,
    /// The column (1-based), when known.
    pub column: Option<u64>,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// A problem in `field`, at `at`.
    pub fn at(field: impl Into<String>, at: Location, message: impl Into<String>) -> Self {
        let known = at != Location::UNKNOWN;
        ConfigError {
            field: field.into(),
            line: known.then(|| at.line()),
            column: known.then(|| at.column()),
            message: message.into(),
        }
    }

    /// The tool the problem is in, when it is in one.
    pub fn tool(&self) -> Option<&str> {
        let rest = self.field.strip_prefix("tools.")?;
        Some(rest.split(['.', '[']).next().unwrap_or(rest))
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(f, "line {line}, column {column}: ")?,
            (Some(line), None) => write!(f, "line {line}: ")?,
            _ => {}
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// Every problem found in a config file (at least one), in the file's order.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors {
    /// The file's path, as given.
    pub path: String,
    /// The problems.
    pub errors: Vec<ConfigError>,
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "{}: {n} problem{}",
            self.path,
            if n == 1 { "" } else { "s" }
        )?;
        for error in &self.errors {
            write!(f, "\n  {error}")?;
        }
        Ok(())
    }
}
