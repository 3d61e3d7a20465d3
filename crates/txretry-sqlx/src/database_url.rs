//! Which database a URL names, by its scheme: the check every binary makes of a database
//! URL (txretry-lab's `--db`, txretry-mcp's `sources.*.url`), written once; hidden, not part
//! of txretry-sqlx's API. Its messages never quote the URL: one that is not read as
//! expected may not be redacted as expected either.

/// The database engine a URL's scheme names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// `sqlite:` (sqlx also takes `sqlite:PATH` and `sqlite::memory:`).
    Sqlite,
    /// `postgres://`, `postgresql://`.
    Postgres,
    /// `mysql://`, `mariadb://`.
    MySql,
}

/// Why a URL names no engine.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemeError {
    /// A Postgres or MySQL scheme without the `//` (`postgres:u:pw@h/db`).
    #[error("a {0} URL starts with `{0}://`")]
    NoSlashes(String),
    /// A scheme no engine has, as written (`oracle://`, `pg:`).
    #[error("unsupported database `{0}`; expected sqlite://PATH, postgres://… or mysql://…")]
    Unsupported(String),
    /// Nothing that reads as a scheme.
    #[error("not a database URL; expected sqlite://PATH, postgres://… or mysql://…")]
    NotAUrl,
}

/// `url` as sqlx must be given it: the `sqlite:` scheme in lower case. sqlx reads the other
/// schemes in any case, but takes a SQLite URL in another case (`SQLITE:x.db`) for a file
/// of that name.
pub fn for_sqlx(url: &str) -> std::borrow::Cow<'_, str> {
    match url.split_once(':') {
        Some((scheme, rest)) if scheme != "sqlite" && scheme.eq_ignore_ascii_case("sqlite") => {
            std::borrow::Cow::Owned(format!("sqlite:{rest}"))
        }
        _ => std::borrow::Cow::Borrowed(url),
    }
}

/// The engine `url`'s scheme names (in any case).
pub fn engine(url: &str) -> Result<Engine, SchemeError> {
    let (scheme, rest) = url.split_once(':').unwrap_or(("", url));
    let engine = match scheme.to_ascii_lowercase().as_str() {
        "postgres" | "postgresql" => Engine::Postgres,
        "mysql" | "mariadb" => Engine::MySql,
        "sqlite" => return Ok(Engine::Sqlite),
        _ if !scheme.is_empty()
            && scheme.len() <= 20
            && scheme.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            let slashes = if rest.starts_with("//") { "//" } else { "" };
            return Err(SchemeError::Unsupported(format!("{scheme}:{slashes}")));
        }
        _ => return Err(SchemeError::NotAUrl),
    };
    if !rest.starts_with("//") {
        return Err(SchemeError::NoSlashes(scheme.to_owned()));
    }
    Ok(engine)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlx_is_given_the_sqlite_scheme_in_lower_case() {
        assert_eq!(for_sqlx("SQLITE:f.db"), "sqlite:f.db");
        assert_eq!(for_sqlx("Sqlite:///tmp/f.db"), "sqlite:///tmp/f.db");
        assert_eq!(for_sqlx("sqlite::memory:"), "sqlite::memory:");
        // Only the scheme: a path keeps its case, and other engines are left as written.
        assert_eq!(for_sqlx("SQLite:/Data/F.db"), "sqlite:/Data/F.db");
        assert_eq!(for_sqlx("POSTGRES://u@h/DB"), "POSTGRES://u@h/DB");
    }

    #[test]
    fn schemes_name_engines() {
        for (url, engine) in [
            ("postgres://u@h/db", Engine::Postgres),
            ("PostgreSQL://h/db", Engine::Postgres),
            ("mysql://root@h/test", Engine::MySql),
            ("mariadb://root@h/test", Engine::MySql),
            ("sqlite://lab.db", Engine::Sqlite),
            ("sqlite::memory:", Engine::Sqlite),
        ] {
            assert_eq!(super::engine(url), Ok(engine), "{url}");
        }
    }

    #[test]
    fn refusals_never_quote_the_url() {
        for (url, error) in [
            (
                "postgres:u:s3cret@h/x",
                SchemeError::NoSlashes("postgres".into()),
            ),
            (
                "oracle://scott:s3cret@h/db",
                SchemeError::Unsupported("oracle://".into()),
            ),
            ("pg:u:s3cret@h/x", SchemeError::Unsupported("pg:".into())),
            ("//u:s3cret@h/x", SchemeError::NotAUrl),
            ("s3cret", SchemeError::NotAUrl),
            ("", SchemeError::NotAUrl),
        ] {
            let got = engine(url).unwrap_err();
            assert_eq!(got, error, "{url}");
            assert!(!got.to_string().contains("s3cret"), "{got}");
        }
    }
}
