//! `${VAR}` in a source URL: secrets stay in the environment, not in the file.

/// `text` with every `${NAME}` replaced by the variable's value; `$$` is a literal `$`.
/// `Err` names the first variable that is not set (or a `${` never closed).
pub fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(body) = tail.strip_prefix("${") {
            let close = body
                .find('}')
                .ok_or_else(|| "a ${ never closed".to_owned())?;
            let name = &body[..close];
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                return Err(format!("${{{name}}} is not a variable name"));
            }
            let value =
                env(name).ok_or_else(|| format!("the environment variable {name} is not set"))?;
            out.push_str(&value);
            rest = &body[close + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The URL with its password (every host's, for a multi-host URL) replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            let shown = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                user.to_owned()
            };
            format!("{scheme}://{shown}@{hosts}{}", redact_query(tail))
        }
        None => format!("{scheme}://{authority}{}", redact_query(tail)),
    }
}

/// A `password=` in the query, replaced by `***`.
fn redact_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_owned();
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{path}?{}", pairs.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "PW").then(|| "s3cret".to_owned())
    }

    #[test]
    fn variables_are_replaced_and_missing_ones_named() {
        assert_eq!(
            expand("postgres://u:${PW}@h/db", &env).unwrap(),
            "postgres://u:s3cret@h/db"
        );
        assert_eq!(expand("a$$b$c", &env).unwrap(), "a$b$c");
        assert_eq!(
            expand("x${NOPE}", &env).unwrap_err(),
            "the environment variable NOPE is not set"
        );
        assert!(expand("x${PW", &env).is_err());
        assert!(expand("x${1A}", &env).is_err());
    }

    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(
            redact("postgres://u:s3cret@h1:5432,h2:5433/db?target_session_attrs=read-write"),
            "postgres://u:***@h1:5432,h2:5433/db?target_session_attrs=read-write"
        );
        assert_eq!(
            redact("mysql://root@127.0.0.1/test"),
            "mysql://root@127.0.0.1/test"
        );
        assert_eq!(
            redact("postgres://h/db?user=u&password=p"),
            "postgres://h/db?user=u&password=***"
        );
        assert_eq!(redact("sqlite://shop.db"), "sqlite://shop.db");
    }
}
