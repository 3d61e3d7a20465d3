//! The typed codes drivers report, in one small `Copy` type.

use std::fmt;

/// A code that identifies a database failure: what a driver adapter extracts from its
/// driver's typed error, or the phrase the message fallback matched.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// A five-character SQLSTATE, as Postgres (and compatible servers) report it.
    SqlState(SqlState),
    /// A MySQL / MariaDB / TiDB server error number (errno), e.g. 1213.
    MySql(u16),
    /// An SQLite result code, extended when the driver has it (e.g. 517); the primary
    /// code is the low byte.
    Sqlite(i32),
    /// A failure the driver detected itself, with no server code: the connection broke,
    /// the pool timed out. The string names it (`"io"`, `"pool timed out"`, …).
    Driver(&'static str),
    /// No typed code anywhere in the error chain; the message contained this phrase.
    Message(&'static str),
}

impl Code {
    /// Whether the database server itself answered with this code (as opposed to the
    /// driver noticing a broken connection, or a message match). A failure at COMMIT is
    /// only trusted to mean "not committed" when the server answered.
    pub fn is_from_server(self) -> bool {
        matches!(self, Code::SqlState(_) | Code::MySql(_) | Code::Sqlite(_))
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Code::SqlState(state) => write!(f, "SQLSTATE {state}"),
            Code::MySql(errno) => write!(f, "MySQL error {errno}"),
            Code::Sqlite(code) => write!(f, "SQLite code {code}"),
            Code::Driver(what) => write!(f, "driver: {what}"),
            Code::Message(phrase) => write!(f, "message \"{phrase}\""),
        }
    }
}

/// A five-character SQLSTATE code, stored inline (no allocation).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SqlState([u8; 5]);

impl SqlState {
    /// Parses a SQLSTATE: exactly five ASCII digits or upper-case letters
    /// (lower case is accepted and upper-cased). Anything else is `None`.
    ///
    /// ```
    /// use txretry_core::SqlState;
    /// assert_eq!(SqlState::new("40p01").unwrap().as_str(), "40P01");
    /// assert!(SqlState::new("4000").is_none());
    /// ```
    pub fn new(code: &str) -> Option<SqlState> {
        let bytes: [u8; 5] = code.as_bytes().try_into().ok()?;
        if !bytes.iter().all(u8::is_ascii_alphanumeric) {
            return None;
        }
        Some(SqlState(bytes.map(|b| b.to_ascii_uppercase())))
    }

    /// A SQLSTATE known at compile time. Panics (at compile time when used in a const)
    /// if `code` is not five ASCII alphanumerics.
    pub const fn from_static(code: &'static str) -> SqlState {
        let b = code.as_bytes();
        assert!(b.len() == 5, "a SQLSTATE has five characters");
        let mut i = 0;
        while i < 5 {
            assert!(b[i].is_ascii_alphanumeric(), "a SQLSTATE is alphanumeric");
            i += 1;
        }
        SqlState([
            b[0].to_ascii_uppercase(),
            b[1].to_ascii_uppercase(),
            b[2].to_ascii_uppercase(),
            b[3].to_ascii_uppercase(),
            b[4].to_ascii_uppercase(),
        ])
    }

    /// The code as text, e.g. `"40001"`.
    pub fn as_str(&self) -> &str {
        // Only ASCII alphanumerics are ever stored.
        std::str::from_utf8(&self.0).unwrap_or("?????")
    }

    /// The two-character class, e.g. `"08"` for connection exceptions.
    pub fn class(&self) -> &str {
        &self.as_str()[..2]
    }
}

impl fmt::Display for SqlState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for SqlState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SqlState({})", self.as_str())
    }
}
