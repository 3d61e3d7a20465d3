//! Just enough SQL lexing to find COMMIT (and BEGIN) statements.

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Postgres,
    Mysql,
}

/// Whether a statement of `sql` (one or several, `;`-separated) starts with the word
/// `COMMIT` (any case; PostgreSQL's `END` too). Quoted strings, quoted identifiers,
/// dollar-quoted bodies and comments are skipped, so a `COMMIT` inside them (a
/// procedure body, a string literal) does not count.
pub(super) fn has_commit(sql: &[u8], dialect: Dialect) -> bool {
    let end: &[&[u8]] = match dialect {
        Dialect::Postgres => &[b"commit", b"end"],
        Dialect::Mysql => &[b"commit"],
    };
    has_statement_starting(sql, dialect, end)
}

/// Whether a statement of `sql` starts a transaction: its first word is `BEGIN` or
/// `START` (`START TRANSACTION`), as [`has_commit`] reads statements.
pub(super) fn has_begin(sql: &[u8], dialect: Dialect) -> bool {
    has_statement_starting(sql, dialect, &[b"begin", b"start"])
}

/// Whether a statement of `sql` starts with one of `words` (lowercase; any case matches).
fn has_statement_starting(sql: &[u8], dialect: Dialect, words: &[&[u8]]) -> bool {
    let mut at_start = true;
    let mut i = 0;
    while let Some(&c) = sql.get(i) {
        let next = sql.get(i + 1).copied();
        match c {
            b';' => {
                at_start = true;
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'-' if next == Some(b'-') => i = line_end(sql, i),
            b'#' if dialect == Dialect::Mysql => i = line_end(sql, i),
            b'/' if next == Some(b'*') => i = comment_end(sql, i, dialect),
            b'\'' | b'"' | b'`' => {
                // MySQL escapes with backslashes in strings; Postgres only in E'...'.
                let backslash = dialect == Dialect::Mysql
                    || (c == b'\'' && i > 0 && matches!(sql[i - 1], b'e' | b'E'));
                i = quote_end(sql, i, backslash);
                at_start = false;
            }
            b'$' if dialect == Dialect::Postgres => {
                i = dollar_quote_end(sql, i).unwrap_or(i + 1);
                at_start = false;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let end = sql[i..]
                    .iter()
                    .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'$'))
                    .map_or(sql.len(), |n| i + n);
                let word = &sql[i..end];
                if at_start && words.iter().any(|w| word.eq_ignore_ascii_case(w)) {
                    return true;
                }
                at_start = false;
                i = end;
            }
            _ => {
                at_start = false;
                i += 1;
            }
        }
    }
    false
}

/// Past the end of the `--` (or `#`) comment at `start`.
fn line_end(sql: &[u8], start: usize) -> usize {
    sql[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(sql.len(), |n| start + n + 1)
}

/// Past the end of the `/* */` comment at `start` (Postgres nests them).
fn comment_end(sql: &[u8], start: usize, dialect: Dialect) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < sql.len() {
        if sql[i..].starts_with(b"/*") && (depth == 0 || dialect == Dialect::Postgres) {
            depth += 1;
            i += 2;
        } else if sql[i..].starts_with(b"*/") {
            depth = depth.saturating_sub(1);
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    sql.len()
}

/// Past the closing quote of the quoted text at `start` (a doubled quote is an escaped
/// one, as is a backslashed one when `backslash`).
fn quote_end(sql: &[u8], start: usize, backslash: bool) -> usize {
    let quote = sql[start];
    let mut i = start + 1;
    while let Some(&c) = sql.get(i) {
        if backslash && c == b'\\' {
            i += 2;
        } else if c == quote {
            if sql.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return i + 1;
            }
        } else {
            i += 1;
        }
    }
    sql.len()
}

/// Past the end of the `$tag$ ... $tag$` body at `start`, if a dollar quote opens there
/// (not a `$1` parameter).
fn dollar_quote_end(sql: &[u8], start: usize) -> Option<usize> {
    let tag_len = sql[start + 1..]
        .iter()
        .position(|&b| b == b'$')
        .filter(|&n| {
            let tag = &sql[start + 1..start + 1 + n];
            tag.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
                && !tag.first().is_some_and(u8::is_ascii_digit)
        })?;
    let delimiter = &sql[start..start + tag_len + 2];
    let body = start + delimiter.len();
    Some(
        sql[body..]
            .windows(delimiter.len())
            .position(|w| w == delimiter)
            .map_or(sql.len(), |n| body + n + delimiter.len()),
    )
}

#[cfg(test)]
mod tests {
    use super::{Dialect, has_begin, has_commit};

    #[test]
    fn finds_commit_statements() {
        for sql in [
            "COMMIT",
            "commit;",
            "  Commit work",
            "SELECT 1; COMMIT",
            "BEGIN; INSERT INTO t VALUES (';'); COMMIT;",
            "/* why */ COMMIT",
            "-- note\nCOMMIT",
        ] {
            assert!(has_commit(sql.as_bytes(), Dialect::Postgres), "{sql}");
            assert!(has_commit(sql.as_bytes(), Dialect::Mysql), "{sql}");
        }
        assert!(has_commit(b"END", Dialect::Postgres));
        assert!(!has_commit(b"END", Dialect::Mysql));
        for sql in [
            "BEGIN",
            "begin isolation level serializable",
            "START TRANSACTION READ ONLY",
        ] {
            assert!(has_begin(sql.as_bytes(), Dialect::Postgres), "{sql}");
            assert!(has_begin(sql.as_bytes(), Dialect::Mysql), "{sql}");
        }
        assert!(!has_begin(b"SELECT 'BEGIN'", Dialect::Postgres));
        assert!(!has_begin(b"COMMIT", Dialect::Mysql));
        assert!(has_commit(b"# c\nCOMMIT", Dialect::Mysql));
    }

    #[test]
    fn ignores_commit_elsewhere() {
        for sql in [
            "ROLLBACK",
            "SELECT 'COMMIT'",
            "SELECT 1 AS commit",
            "INSERT INTO t VALUES ('a;COMMIT')",
            "SELECT \"x;commit\"",
            "/* ; COMMIT */ SELECT 1",
            "committed",
            "",
        ] {
            assert!(!has_commit(sql.as_bytes(), Dialect::Postgres), "{sql}");
            assert!(!has_commit(sql.as_bytes(), Dialect::Mysql), "{sql}");
        }
        assert!(!has_commit(
            b"CREATE PROCEDURE p() AS $body$ BEGIN NULL; COMMIT; END $body$ LANGUAGE plpgsql",
            Dialect::Postgres
        ));
        assert!(!has_commit(b"SELECT E'\\'; COMMIT'", Dialect::Postgres));
        assert!(!has_commit(b"SELECT 'it\\'s; COMMIT'", Dialect::Mysql));
        assert!(!has_commit(b"END", Dialect::Mysql));
        assert!(!has_commit(b"SELECT $1; ", Dialect::Postgres));
    }
}
