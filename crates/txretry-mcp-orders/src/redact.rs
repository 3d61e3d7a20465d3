//! A database URL as the server may print it: without its password.

/// `url` with its password (if any) replaced by `***`. A string that is not a URL with an
/// authority (`sqlite:PATH`) has no password and comes back unchanged.
pub fn url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Only fails for URLs that cannot have a password, and this one has one.
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        Ok(_) => url.to_owned(),
        // Unparsable: nothing can be told apart, so show only what precedes a userinfo.
        Err(_) => match url.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once("://") {
                Some((scheme, _)) => format!("{scheme}://***@{host}"),
                None => format!("***@{host}"),
            },
            None => url.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_never_shown() {
        assert_eq!(
            super::url("postgres://app:s3cret@db:5432/shop"),
            "postgres://app:***@db:5432/shop"
        );
        assert_eq!(
            super::url("mysql://root@127.0.0.1:3306/test"),
            "mysql://root@127.0.0.1:3306/test"
        );
        assert_eq!(super::url("sqlite:/tmp/o.db"), "sqlite:/tmp/o.db");
        let unparsable = super::url("postgres://app:s3cret@[db/shop");
        assert!(!unparsable.contains("s3cret"), "{unparsable}");
    }
}
