//! Keeping passwords out of what txretry's binaries print (txretry-lab, txretry-mcp): a
//! database URL itself, and any text (a driver's error message, a usage error) that might
//! echo it. Here, next to the multi-host URL parsing of `PrimaryPool`,
//! so that every binary masks the same way; hidden, not part of txretry-sqlx's API.

use url::Url;

/// The mask that replaces a secret.
pub const MASK: &str = "***";

/// The URL with the password of `user:pass@` and any `password=` style query parameter
/// replaced by `***`. Parsed by the `url` crate where it can; what it cannot parse (a
/// multi-host Postgres URL `postgres://u:pw@h1:1,h2:2/db`, an unencoded `/` in a password,
/// an empty password) is redacted by hand, erring on the side of hiding too much.
pub fn redact_url(url: &str) -> String {
    redact_parsed(url).unwrap_or_else(|| redact_by_hand(url))
}

/// [`redact_url`] by the `url` crate; `None` where it cannot tell the user info.
fn redact_parsed(text: &str) -> Option<String> {
    if !text.contains("://") {
        return None;
    }
    let mut url = Url::parse(text).ok()?;
    if url.password().is_some() && at_after_authority(text) {
        // `u:pa/ss@host`: the `url` crate ends the authority at the `/` and reads `pa` as
        // the password; everything up to the last `@` may be one.
        return None;
    }
    match url.password() {
        Some(_) => url.set_password(Some(MASK)).ok()?,
        // `u:@h` (an empty password) reads as no password at all: leave it to the hand.
        None if !url.username().is_empty() => return None,
        None => {}
    }
    let secret_query = url.query_pairs().any(|(key, _)| is_secret_key(&key));
    if url.password().is_none() && !secret_query {
        // Nothing to mask: the text as it was, not as the `url` crate would write it
        // (which percent-encodes, e.g. `postgres://…` in a message).
        return Some(text.to_owned());
    }
    if secret_query {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(key, value)| {
                let value = if is_secret_key(&key) {
                    MASK.to_owned()
                } else {
                    value.into_owned()
                };
                (key.into_owned(), value)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    Some(url.into())
}

/// Where what follows the scheme starts: after `scheme://`, or after `scheme:` alone (a URL
/// written without the slashes, `postgres:u:pw@h/db`, still holds a password).
fn after_scheme(url: &str) -> Option<usize> {
    if let Some(end) = url.find("://") {
        return Some(end + 3);
    }
    let (scheme, _) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(scheme.len() + 1)
}

/// Whether an `@` follows the authority of `text` (a `scheme://` URL): in its path, query
/// or fragment, where a password with an unencoded `/`, `?` or `#` puts it.
fn at_after_authority(text: &str) -> bool {
    let rest = after_scheme(text).map_or(text, |start| &text[start..]);
    rest.find(['/', '?', '#'])
        .is_some_and(|end| rest[end..].contains('@'))
}

/// [`redact_url`] by hand: everything between the scheme (`://`, or `:` alone) and the
/// last `@` counts as user info. A password may hold an unencoded `/`, `?`, `#` or `@`, so
/// the last `@` anywhere ends it, even one in the query (which hides too much, never too
/// little).
fn redact_by_hand(url: &str) -> String {
    let Some(scheme_end) = after_scheme(url) else {
        return redact_query(url);
    };
    let (head, rest) = url.split_at(scheme_end);
    if let Some((user, after)) = user_and_after_password(rest) {
        return format!("{head}{user}:{MASK}{}", redact_query(after));
    }
    let query_start = rest.find(['?', '#']).unwrap_or(rest.len());
    let (before_query, query) = rest.split_at(query_start);
    format!("{head}{before_query}{}", redact_query(query))
}

/// In what follows a URL's scheme: the user name, and what follows the password (from the
/// last `@` on), when the user info has a password (a `:` before the last `@`).
fn user_and_after_password(rest: &str) -> Option<(&str, &str)> {
    let at = rest.rfind('@')?;
    let (user, _) = rest[..at].split_once(':')?;
    Some((user, &rest[at..]))
}

/// `?a=1&password=x` → `?a=1&password=***`: any parameter whose name mentions `pass` or `pwd`.
fn redact_query(query: &str) -> String {
    let Some(q) = query.find('?') else {
        return query.to_owned();
    };
    let (path, rest) = query.split_at(q + 1);
    // A fragment (`#…`) is no parameter: it stays, after the masked value.
    let (params, fragment) = rest.split_at(rest.find('#').unwrap_or(rest.len()));
    let redacted: Vec<String> = params
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if is_secret_key(key) => format!("{key}={MASK}"),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{path}{}{fragment}", redacted.join("&"))
}

fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.contains("pass") || key.contains("pwd") || key.contains("secret")
}

/// The password in a URL's user info, as written (percent-encoded) and decoded, when
/// there is one.
pub fn passwords_in(url: &str) -> Vec<String> {
    let Some(scheme_end) = after_scheme(url) else {
        return Vec::new();
    };
    let rest = &url[scheme_end..];
    let before_query = &rest[..rest.find(['?', '#']).unwrap_or(rest.len())];
    let mut found = Vec::new();
    if let Some(at) = before_query.rfind('@')
        && let Some((_, password)) = before_query[..at].split_once(':')
    {
        found.push(password.to_owned());
    }
    // A password with an unencoded `/`, `?`, `#` or `@` runs to the last `@`.
    if let Some((user, after)) = user_and_after_password(rest) {
        let password = &rest[user.len() + 1..rest.len() - after.len()];
        found.push(password.to_owned());
    }
    if let Some(q) = rest.find('?') {
        for pair in rest[q + 1..].split(['&', '#']) {
            if let Some((key, value)) = pair.split_once('=')
                && is_secret_key(key)
            {
                found.push(value.to_owned());
            }
        }
    }
    // As the `url` crate reads it, where it can: it tells the user info of a password with
    // an unencoded `@` apart from the host, and decodes the query.
    if let Ok(parsed) = Url::parse(url) {
        found.extend(parsed.password().map(str::to_owned));
        found.extend(
            parsed
                .query_pairs()
                .filter(|(key, _)| is_secret_key(key))
                .map(|(_, value)| value.into_owned()),
        );
    }
    let decoded: Vec<String> = found.iter().map(|p| percent_decode(p)).collect();
    found.extend(decoded);
    found.retain(|p| !p.is_empty());
    found.sort();
    found.dedup();
    // Longest first, so a password containing another is replaced whole.
    found.sort_by_key(|p| std::cmp::Reverse(p.len()));
    found
}

/// Text safe to print: every URL in it redacted, and every known secret masked wherever it
/// appears (a driver may echo a password outside a URL).
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = redact_urls_in(text);
    for secret in secrets {
        if secret.chars().count() >= WHOLE_WORD_BELOW {
            out = out.replace(secret.as_str(), MASK);
        } else if !secret.is_empty() {
            out = mask_whole_words(&out, secret);
        }
    }
    out
}

/// Secrets shorter than this are masked only where they stand alone, not inside a word: a
/// password `a` masked everywhere turned `database` into `d***t***b***se`.
const WHOLE_WORD_BELOW: usize = 6;

/// `text` with each occurrence of `secret` that no letter or digit touches masked.
fn mask_whole_words(text: &str, secret: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut before: Option<char> = None;
    while let Some(at) = rest.find(secret) {
        let (head, tail) = rest.split_at(at);
        let prev = head.chars().next_back().or(before);
        let next = tail[secret.len()..].chars().next();
        let alone =
            !prev.is_some_and(char::is_alphanumeric) && !next.is_some_and(char::is_alphanumeric);
        out.push_str(head);
        out.push_str(if alone { MASK } else { secret });
        before = secret.chars().next_back();
        rest = &tail[secret.len()..];
    }
    out.push_str(rest);
    out
}

/// Every `scheme://…` token in free text, redacted with [`redact_url`]. A token ends at
/// whitespace or a quote.
pub fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("://") {
        // The token starts after the last delimiter before `://`.
        let start = rest[..pos].rfind(is_delimiter).map_or(0, |i| {
            i + rest[i..].chars().next().map_or(1, char::len_utf8)
        });
        let end = rest[pos..]
            .find(is_delimiter)
            .map_or(rest.len(), |i| pos + i);
        // Punctuation that ends a sentence or a clause is not the URL's: `… at URL: error`.
        let end = start
            + rest[start..end]
                .trim_end_matches([':', ';', '.', ','])
                .len()
                .max(pos + 3 - start);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn is_delimiter(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\'' | '"' | '`' | '<' | '>' | '(' | ')' | '[' | ']' | '{' | '}' | ','
        )
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_and_password() {
        assert_eq!(
            redact_url("postgres://alice:s3cret@db:5432/app"),
            "postgres://alice:***@db:5432/app"
        );
        assert_eq!(
            redact_url("mysql://root:pw@127.0.0.1/test?ssl-mode=disabled"),
            "mysql://root:***@127.0.0.1/test?ssl-mode=disabled"
        );
    }

    #[test]
    fn nothing_to_hide() {
        for url in [
            "postgres://postgres@127.0.0.1:5432/test",
            "mysql://h/db",
            "sqlite://lab.db",
            "sqlite",
            "postgres://…",
            "postgres://h/caf%C3%A9?application_name=a b",
        ] {
            assert_eq!(redact_url(url), url);
        }
        let text = "expected sqlite://PATH, postgres://… or mysql://…";
        assert_eq!(scrub(text, &[]), text);
    }

    #[test]
    fn awkward_passwords() {
        // An unencoded '@' or '/' in the password: everything up to the last '@' is user info.
        assert_eq!(
            redact_url("postgres://u:p@ss@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(redact_url("postgres://u:a/b@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact_url("postgres://:only@h"), "postgres://:***@h");
        assert_eq!(redact_url("postgres://u:@h"), "postgres://u:***@h");
        // An unencoded '#' or '?', which start a fragment or a query, and a '/' with an
        // '@' after it, where the `url` crate ends the authority at the '/'.
        for url in [
            "postgres://postgres:pa#ss99XYZ@127.0.0.1:5432/nope",
            "postgres://postgres:pa?ss99XYZ@127.0.0.1:5432/nope",
            "mysql://root:x?y#ss99XYZ@127.0.0.1/test",
            "postgres://u:Sup3r@ss99XYZ/PW@127.0.0.1/nope",
            "postgres://u:pa#ss99XYZ@h1:5432,h2:5433/db",
        ] {
            let shown = redact_url(url);
            assert!(!shown.contains("ss99XYZ"), "{url} shown as {shown}");
            assert!(
                shown.ends_with("@127.0.0.1:5432/nope") || shown.contains(":***@"),
                "{shown}"
            );
            let secrets = passwords_in(url);
            let text = scrub(
                &format!("cannot connect to {url}: invalid port number"),
                &secrets,
            );
            assert!(!text.contains("ss99XYZ"), "{url}: {text}");
        }
        assert_eq!(
            redact_url("postgres://postgres:pa#ss@127.0.0.1:5432/db?sslmode=require"),
            "postgres://postgres:***@127.0.0.1:5432/db?sslmode=require"
        );
    }

    #[test]
    fn a_url_without_slashes_still_hides_its_password() {
        for (url, shown) in [
            (
                "postgres:u:s3cret@127.0.0.1:1/x",
                "postgres:u:***@127.0.0.1:1/x",
            ),
            ("mysql:root:s3cret@h/test", "mysql:root:***@h/test"),
            ("pg:u:s3cret@h/x", "pg:u:***@h/x"),
        ] {
            assert_eq!(redact_url(url), shown);
            assert!(passwords_in(url).contains(&"s3cret".to_owned()), "{url}");
        }
        // A scheme alone, or a path that is no URL, has nothing to hide.
        assert_eq!(redact_url("sqlite:lab.db"), "sqlite:lab.db");
        assert_eq!(redact_url("sqlite::memory:"), "sqlite::memory:");
        assert!(passwords_in("sqlite::memory:").is_empty());
    }

    #[test]
    fn password_parameters() {
        assert_eq!(
            redact_url("postgres://h/db?user=u&password=x&sslmode=disable"),
            "postgres://h/db?user=u&password=***&sslmode=disable"
        );
        // The separator after the masked value stays, whichever it is.
        assert_eq!(
            redact_url("postgres://h/db?password=x#main"),
            "postgres://h/db?password=***#main"
        );
        assert_eq!(
            redact_urls_in("at postgres://h/db?password=x&a=1, then"),
            "at postgres://h/db?password=***&a=1, then"
        );
    }

    #[test]
    fn urls_inside_text() {
        let text = "invalid value 'postgres://u:hunter2@h/db' for '--db'; also mysql://r:pw@x";
        let clean = redact_urls_in(text);
        assert_eq!(
            clean,
            "invalid value 'postgres://u:***@h/db' for '--db'; also mysql://r:***@x"
        );
    }

    #[test]
    fn known_secrets_are_masked_anywhere() {
        let url = "postgres://u:p%40ss%2Fword@h/db";
        let secrets = passwords_in(url);
        assert!(secrets.contains(&"p@ss/word".to_owned()), "{secrets:?}");
        assert!(secrets.contains(&"p%40ss%2Fword".to_owned()), "{secrets:?}");
        let clean = scrub(
            "auth failed with password p@ss/word for postgres://u:p%40ss%2Fword@h/db",
            &secrets,
        );
        assert!(
            !clean.contains("p@ss/word") && !clean.contains("p%40ss"),
            "{clean}"
        );
    }

    #[test]
    fn a_short_secret_is_masked_only_where_it_stands_alone() {
        let secrets = passwords_in("postgres://postgres:a@127.0.0.1:5432/audit_lab");
        assert_eq!(
            scrub(
                r#"database "audit_lab" does not exist (password a)"#,
                &secrets
            ),
            r#"database "audit_lab" does not exist (password ***)"#
        );
        assert_eq!(scrub("a,a a", &secrets), "***,*** ***");
        // A longer one is masked wherever it appears, inside a word too.
        let secrets = passwords_in("postgres://u:hunter2@h/db");
        assert_eq!(scrub("xhunter2y", &secrets), "x***y");
    }

    #[test]
    fn punctuation_after_a_url_is_not_part_of_it() {
        assert_eq!(
            redact_urls_in("no route to postgres://u@h/db?password=S3cretPw: error occurred."),
            "no route to postgres://u@h/db?password=***: error occurred."
        );
        assert_eq!(redact_urls_in("see https://x.io."), "see https://x.io.");
    }

    #[test]
    fn the_url_crate_parses_what_it_can() {
        for url in [
            "postgres://alice:s3cret@db:5432/app",
            "postgres://u:p@ss@h/db",
            "postgres://:only@h",
            "postgres://h/db?user=u&password=x&sslmode=disable",
            "mysql://h/db",
        ] {
            assert!(redact_parsed(url).is_some(), "{url}");
        }
        for url in [
            "postgres://u:pw@h1:1,h2:2/db",
            "postgres://u:a/b@h/db",
            "postgres://u:@h",
            "sqlite",
        ] {
            assert_eq!(redact_parsed(url), None, "{url}");
        }
    }

    #[test]
    fn multi_host_urls_are_redacted_by_hand() {
        assert_eq!(
            redact_url("postgres://u:pw@h1:1,h2:2/db?password=x"),
            "postgres://u:***@h1:1,h2:2/db?password=***"
        );
        assert_eq!(
            passwords_in("postgres://u:pw@h1:1,h2:2/db"),
            vec!["pw".to_owned()]
        );
    }

    #[test]
    fn percent_decoding_is_total() {
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
        assert_eq!(percent_decode("%"), "%");
    }
}
