//! A statement's SQL with named placeholders (`:order_id`, `:order.total`), turned into the
//! driver's positional ones (`$1` on Postgres, `?` on MySQL and SQLite) and the list of
//! values to bind. The SQL text comes from the config file only; a call's values are always
//! bound, never written into it.

use std::fmt;
use std::sync::Arc;

/// What a placeholder refers to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Ref {
    /// A parameter of the tool: `:name`.
    Param(String),
    /// A column of a captured row: `:capture.column`.
    Column(String, String),
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ref::Param(name) => write!(f, ":{name}"),
            Ref::Column(capture, column) => write!(f, ":{capture}.{column}"),
        }
    }
}

/// How a database spells positional placeholders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `$1`, `$2`, … (a value used twice is bound once).
    Dollar,
    /// `?` for each use.
    Question,
}

/// Whose rules the SQL is read by: where its quotes, escapes and comments end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// Block comments nest; a backslash escapes only in an `E'…'` string.
    Postgres,
    /// A backslash escapes in `'…'` and `"…"` strings; `#` starts a comment to the end of
    /// the line (MySQL and MariaDB by default).
    MySql,
    /// The standard's rules.
    Sqlite,
}

/// A statement ready for one database: its SQL and what to bind, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// The SQL with positional placeholders (shared: bound to every call's query as it is).
    pub sql: Arc<str>,
    /// What each position binds.
    pub binds: Vec<Ref>,
}

/// A statement's SQL, split at its placeholders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Text(String),
    Ref(Ref),
}

/// Why a statement's SQL cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SqlError {
    /// A positional placeholder written by hand, and its index among the SQL's characters
    /// (shown counting from 1, as YAML columns are).
    #[error(
        "positional placeholder {:?} at character {} (counting from 1): use named ones (:name)",
        .0,
        .1 + 1
    )]
    Positional(String, usize),
    /// A quote or comment never closed, and the index of its opening character (shown
    /// counting from 1).
    #[error("{} opened at character {} (counting from 1) is never closed", .0, .1 + 1)]
    Unclosed(&'static str, usize),
    /// Nothing but white space.
    #[error("the statement is empty")]
    Empty,
    /// More than one statement: the index of the `;` that ends the first (shown counting
    /// from 1). SQLite would run them all as one; the other databases refuse them.
    #[error(
        "a `;` at character {} (counting from 1) ends the statement and another follows: \
         write each statement as an entry of its own (they run in one transaction)",
        .0 + 1
    )]
    Several(usize),
}

impl Statement {
    /// Splits `sql` at its placeholders, skipping quoted strings, quoted identifiers,
    /// comments, Postgres dollar-quoted strings and `::` casts, read by `dialect`'s rules.
    /// One statement only: a `;` may end it, followed by nothing but space and comments.
    pub fn parse(sql: &str, dialect: Dialect) -> Result<Statement, SqlError> {
        if sql.trim().is_empty() {
            return Err(SqlError::Empty);
        }
        let chars: Vec<char> = sql.chars().collect();
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut i = 0;
        // Where a `;` ended the statement, if one did.
        let mut ended: Option<usize> = None;
        let mysql = dialect == Dialect::MySql;
        while i < chars.len() {
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            let line_comment = (c == '-' && next == Some('-')) || (c == '#' && mysql);
            let comment = line_comment || (c == '/' && next == Some('*'));
            if let Some(at) = ended
                && !(c.is_whitespace() || c == ';' || comment)
            {
                return Err(SqlError::Several(at));
            }
            match c {
                '\'' | '"' | '`' => {
                    let escapes =
                        (c == '\'' && (mysql || e_string(&chars, i))) || (c == '"' && mysql);
                    let end = closing(&chars, i + 1, c, escapes).ok_or(SqlError::Unclosed(
                        match c {
                            '\'' => "a string",
                            _ => "a quoted identifier",
                        },
                        i,
                    ))?;
                    text.extend(&chars[i..=end]);
                    i = end + 1;
                }
                _ if line_comment => {
                    let end = chars[i..]
                        .iter()
                        .position(|&c| c == '\n')
                        .map_or(chars.len(), |n| i + n);
                    text.extend(&chars[i..end]);
                    i = end;
                }
                '/' if next == Some('*') => {
                    let end = comment_end(&chars, i, dialect == Dialect::Postgres)
                        .ok_or(SqlError::Unclosed("a comment", i))?;
                    text.extend(&chars[i..end]);
                    i = end;
                }
                '$' if next.is_some_and(|n| n.is_ascii_digit()) => {
                    let end = (i + 1..chars.len())
                        .find(|&j| !chars[j].is_ascii_digit())
                        .unwrap_or(chars.len());
                    return Err(SqlError::Positional(chars[i..end].iter().collect(), i));
                }
                '$' => match dollar_tag(&chars, i) {
                    Some(tag_end) => {
                        let tag = &chars[i..=tag_end];
                        let close = (tag_end + 1..chars.len())
                            .find(|&j| chars[j..].starts_with(tag))
                            .ok_or(SqlError::Unclosed("a dollar-quoted string", i))?;
                        let end = close + tag.len();
                        text.extend(&chars[i..end]);
                        i = end;
                    }
                    None => {
                        text.push(c);
                        i += 1;
                    }
                },
                '?' => return Err(SqlError::Positional("?".into(), i)),
                ':' if next == Some(':') => {
                    text.push_str("::");
                    i += 2;
                }
                ':' if next.is_some_and(is_start) && !chars[..i].ends_with(&[':']) => {
                    let (name, after) = ident(&chars, i + 1);
                    let (reference, end) = if chars.get(after) == Some(&'.')
                        && chars.get(after + 1).copied().is_some_and(is_start)
                    {
                        let (column, end) = ident(&chars, after + 1);
                        (Ref::Column(name, column), end)
                    } else {
                        (Ref::Param(name), after)
                    };
                    if !text.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                    }
                    parts.push(Part::Ref(reference));
                    i = end;
                }
                _ => {
                    if c == ';' {
                        ended.get_or_insert(i);
                    }
                    text.push(c);
                    i += 1;
                }
            }
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Statement { parts })
    }

    /// Every placeholder, in order (repeats included).
    pub fn refs(&self) -> impl Iterator<Item = &Ref> {
        self.parts.iter().filter_map(|part| match part {
            Part::Ref(reference) => Some(reference),
            Part::Text(_) => None,
        })
    }

    /// The SQL for a database that spells placeholders `style`.
    pub fn prepare(&self, style: Style) -> Prepared {
        let mut sql = String::new();
        let mut binds: Vec<Ref> = Vec::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => sql.push_str(text),
                Part::Ref(reference) => match style {
                    Style::Question => {
                        sql.push('?');
                        binds.push(reference.clone());
                    }
                    Style::Dollar => {
                        let n = match binds.iter().position(|b| b == reference) {
                            Some(n) => n + 1,
                            None => {
                                binds.push(reference.clone());
                                binds.len()
                            }
                        };
                        sql.push_str(&format!("${n}"));
                    }
                },
            }
        }
        Prepared {
            sql: sql.into(),
            binds,
        }
    }
}

/// The index of the quote closing one opened before `from` (a doubled quote is an escaped
/// one; with `escapes`, so is a backslashed one).
fn closing(chars: &[char], from: usize, quote: char, escapes: bool) -> Option<usize> {
    let mut j = from;
    while j < chars.len() {
        if chars[j] == quote {
            if chars.get(j + 1) == Some(&quote) {
                j += 2;
                continue;
            }
            return Some(j);
        }
        if escapes && chars[j] == '\\' {
            j += 2;
            continue;
        }
        j += 1;
    }
    None
}

/// Where the block comment opened at `i` ends (the index after its `*/`), if it does;
/// `nested`: a `/*` inside opens another, which its own `*/` closes (Postgres).
fn comment_end(chars: &[char], i: usize, nested: bool) -> Option<usize> {
    let mut depth = 0_usize;
    let mut j = i;
    while j + 1 < chars.len() {
        match (chars[j], chars[j + 1]) {
            ('/', '*') if depth == 0 || nested => {
                depth += 1;
                j += 2;
            }
            ('*', '/') => {
                depth -= 1;
                j += 2;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => j += 1,
        }
    }
    None
}

/// Whether the quote at `i` opens a Postgres escape string (`E'…'`).
fn e_string(chars: &[char], i: usize) -> bool {
    i >= 1
        && matches!(chars[i - 1], 'E' | 'e')
        && (i == 1 || !(chars[i - 2].is_ascii_alphanumeric() || chars[i - 2] == '_'))
}

/// Where a dollar-quote tag (`$$`, `$body$`) that starts at `i` ends, if one does.
fn dollar_tag(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i + 1;
    while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
        j += 1;
    }
    (chars.get(j) == Some(&'$') && (j == i + 1 || !chars[i + 1].is_ascii_digit())).then_some(j)
}

fn is_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn ident(chars: &[char], from: usize) -> (String, usize) {
    let end = (from..chars.len())
        .find(|&j| !(chars[j].is_ascii_alphanumeric() || chars[j] == '_'))
        .unwrap_or(chars.len());
    (chars[from..end].iter().collect(), end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str) -> Ref {
        Ref::Param(name.into())
    }

    #[test]
    fn one_statement_only() {
        for dialect in [Dialect::Postgres, Dialect::MySql, Dialect::Sqlite] {
            for sql in [
                "UPDATE t SET a = :a; UPDATE t SET b = :a",
                "UPDATE t SET a = :a;DELETE FROM ledger",
                "SELECT :a; ; SELECT 1",
            ] {
                assert!(
                    matches!(Statement::parse(sql, dialect), Err(SqlError::Several(_))),
                    "{dialect:?}: {sql}"
                );
            }
            for sql in [
                "UPDATE t SET a = :a;",
                "UPDATE t SET a = :a ; -- done\n",
                "UPDATE t SET a = :a; /* done */ ",
                "SELECT ';', :a",
            ] {
                assert!(Statement::parse(sql, dialect).is_ok(), "{dialect:?}: {sql}");
            }
        }
        let err = Statement::parse("SELECT :a; SELECT :a", Dialect::Sqlite).unwrap_err();
        assert!(err.to_string().contains("character 10"), "{err}");
    }

    #[test]
    fn each_dialect_ends_quotes_and_comments_its_own_way() {
        // MySQL: `#` comments, and a backslash escapes in "…" strings too.
        let s = Statement::parse("SELECT :a # it's :no\nFROM t", Dialect::MySql).unwrap();
        assert_eq!(s.refs().collect::<Vec<_>>(), [&param("a")]);
        let s = Statement::parse("SELECT \"\\\" :no\", :a", Dialect::MySql).unwrap();
        assert_eq!(s.refs().collect::<Vec<_>>(), [&param("a")]);
        // Postgres: `#` is an operator, and block comments nest.
        let s = Statement::parse("SELECT :a # :b", Dialect::Postgres).unwrap();
        assert_eq!(s.refs().collect::<Vec<_>>(), [&param("a"), &param("b")]);
        let s = Statement::parse("SELECT /* /* */ :no */ :a", Dialect::Postgres).unwrap();
        assert_eq!(s.refs().collect::<Vec<_>>(), [&param("a")]);
        // SQLite and MySQL: the first `*/` ends a comment.
        let s = Statement::parse("SELECT /* /* */ :a", Dialect::Sqlite).unwrap();
        assert_eq!(s.refs().collect::<Vec<_>>(), [&param("a")]);
    }

    #[test]
    fn names_become_positions_per_database() {
        let s = Statement::parse(
            "UPDATE t SET a = :a WHERE id = :id AND b = :a",
            Dialect::Postgres,
        )
        .unwrap();
        let pg = s.prepare(Style::Dollar);
        assert_eq!(&*pg.sql, "UPDATE t SET a = $1 WHERE id = $2 AND b = $1");
        assert_eq!(pg.binds, [param("a"), param("id")]);
        let my = s.prepare(Style::Question);
        assert_eq!(&*my.sql, "UPDATE t SET a = ? WHERE id = ? AND b = ?");
        assert_eq!(my.binds, [param("a"), param("id"), param("a")]);
    }

    #[test]
    fn captures_are_a_name_and_a_column() {
        let s = Statement::parse(
            "INSERT INTO r (o, q) VALUES (:order.id, :qty)",
            Dialect::Postgres,
        )
        .unwrap();
        assert_eq!(
            s.prepare(Style::Question).binds,
            [Ref::Column("order".into(), "id".into()), param("qty")]
        );
    }

    #[test]
    fn quotes_comments_and_casts_are_left_alone() {
        let sql = "SELECT ':no', \"a:b\", `c:d`, x::text, $$:no$$, $t$ :no $t$ -- :no\n/* :no */ FROM t WHERE y = :yes";
        let s = Statement::parse(sql, Dialect::Postgres).unwrap();
        assert_eq!(s.refs().collect::<Vec<_>>(), [&param("yes")]);
        // MySQL's backslash escapes; a Postgres string where a backslash is plain, and an
        // E'' string where it escapes.
        let s = Statement::parse(
            "SELECT 'it''s :no', 'a\\'b :no' WHERE z = :z",
            Dialect::MySql,
        )
        .unwrap();
        assert_eq!(s.refs().collect::<Vec<_>>(), [&param("z")]);
        let s = Statement::parse(
            "SELECT 'C:\\' || :path, E'a\\'b :no' WHERE z = :z",
            Dialect::Postgres,
        )
        .unwrap();
        assert_eq!(s.refs().collect::<Vec<_>>(), [&param("path"), &param("z")]);
    }

    #[test]
    fn positional_placeholders_and_unclosed_quotes_are_refused() {
        assert_eq!(
            Statement::parse("SELECT * FROM t WHERE id = ?", Dialect::Postgres),
            Err(SqlError::Positional("?".into(), 27))
        );
        assert_eq!(
            Statement::parse("SELECT $12", Dialect::Postgres),
            Err(SqlError::Positional("$12".into(), 7))
        );
        assert!(matches!(
            Statement::parse("SELECT 'open", Dialect::Postgres),
            Err(SqlError::Unclosed(..))
        ));
        assert!(matches!(
            Statement::parse("SELECT 1 /* x", Dialect::Postgres),
            Err(SqlError::Unclosed(..))
        ));
        assert_eq!(
            Statement::parse("  ", Dialect::Postgres),
            Err(SqlError::Empty)
        );
        // Characters, not bytes, counted from 1.
        assert_eq!(
            Statement::parse("SELECT 'é', 'open", Dialect::Postgres)
                .unwrap_err()
                .to_string(),
            "a string opened at character 13 (counting from 1) is never closed"
        );
    }
}
