//! Which database the orders tools run on, from a `--db` URL: `sqlite:PATH`,
//! `postgres://…` (or `postgresql://…`), `mysql://…` (MySQL or MariaDB).

use std::path::PathBuf;
use std::str::FromStr;

use sqlx::mysql::MySqlConnectOptions;
use sqlx::postgres::PgConnectOptions;

/// A database to open, its URL checked (not yet connected to).
#[derive(Clone)]
pub enum Target {
    /// An SQLite file, created when missing.
    Sqlite(PathBuf),
    /// A Postgres server.
    Postgres(PgConnectOptions),
    /// A MySQL or MariaDB server.
    MySql(MySqlConnectOptions),
}

/// Why a database URL was refused. Never contains the URL (it may hold a password).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Not one of the schemes the tools run on.
    #[error("expected sqlite:PATH, postgres://… or mysql://…")]
    Scheme,
    /// `sqlite:` without a path.
    #[error("sqlite:PATH needs a path")]
    NoPath,
    /// The driver could not read the URL.
    #[error("not a valid URL: {0}")]
    Invalid(#[source] sqlx::Error),
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(url: &str) -> Result<Target, TargetError> {
        let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
        match scheme.to_ascii_lowercase().as_str() {
            "sqlite" => {
                let path = url["sqlite:".len()..].trim_start_matches("//");
                if path.is_empty() {
                    return Err(TargetError::NoPath);
                }
                Ok(Target::Sqlite(PathBuf::from(path)))
            }
            "postgres" | "postgresql" => PgConnectOptions::from_str(url)
                .map(Target::Postgres)
                .map_err(TargetError::Invalid),
            "mysql" => MySqlConnectOptions::from_str(url)
                .map(Target::MySql)
                .map_err(TargetError::Invalid),
            _ => Err(TargetError::Scheme),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn urls_name_their_database() {
        assert!(
            matches!("sqlite:/tmp/o.db".parse(), Ok(Target::Sqlite(p)) if p == Path::new("/tmp/o.db"))
        );
        assert!(
            matches!("sqlite:///tmp/o.db".parse(), Ok(Target::Sqlite(p)) if p == Path::new("/tmp/o.db"))
        );
        assert!(matches!(
            "postgres://u:pw@localhost/db".parse(),
            Ok(Target::Postgres(_))
        ));
        assert!(matches!(
            "mysql://root@127.0.0.1:3306/test".parse(),
            Ok(Target::MySql(_))
        ));
        assert!(matches!(
            "sqlite:".parse::<Target>(),
            Err(TargetError::NoPath)
        ));
        assert!(matches!(
            "oracle://x".parse::<Target>(),
            Err(TargetError::Scheme)
        ));
        assert!(matches!(
            "orders.db".parse::<Target>(),
            Err(TargetError::Scheme)
        ));
        assert!(matches!(
            "postgres://u:pw@[bad/db".parse::<Target>(),
            Err(TargetError::Invalid(_))
        ));
    }
}
