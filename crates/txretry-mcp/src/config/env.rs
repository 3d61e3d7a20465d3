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
}
