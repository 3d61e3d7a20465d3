//! A multi-host Postgres URL, one `PgConnectOptions` per host: the hosts in the
//! authority (`postgres://app@h1:5432,h2:5433/shop`) or, as libpq also takes them, in the
//! `host` parameter (`postgres:///shop?host=h1,h2&port=5432,5433`).

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;

use super::MultiHostError;

/// Whether `url` lists several hosts, in its authority or its `host` parameter.
pub(super) fn is_multi_host(url: &str) -> bool {
    let parts = UrlParts::of(url);
    parts.hosts.contains(',') || parts.param("host").is_some_and(|h| h.contains(','))
}

/// A Postgres URL cut where a multi-host URL differs from a single-host one.
struct UrlParts<'a> {
    scheme: &'a str,
    /// `user[:password]@`, or empty.
    user: &'a str,
    /// The authority's host list: `h1:5432,h2:5433`, or empty.
    hosts: &'a str,
    /// `/database`, or empty.
    base: &'a str,
    /// The query parameters, as written (`key=value`).
    params: Vec<&'a str>,
}

impl<'a> UrlParts<'a> {
    /// `url` cut in parts; an URL without a scheme has an empty one.
    fn of(url: &'a str) -> UrlParts<'a> {
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        let (user, hosts) = match authority.rfind('@') {
            Some(at) => authority.split_at(at + 1),
            None => ("", authority),
        };
        let (base, query) = path.split_once('?').unwrap_or((path, ""));
        let params = query.split('&').filter(|kv| !kv.is_empty()).collect();
        UrlParts {
            scheme,
            user,
            hosts,
            base,
            params,
        }
    }

    /// The value of parameter `name`, if it is given.
    fn param(&self, name: &str) -> Option<&'a str> {
        self.params
            .iter()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    }

    /// The query (`?a=1&b=2`, or empty) without the parameters named in `without`, plus
    /// `extra` parameters.
    fn query(&self, without: &[&str], extra: &[String]) -> String {
        let kept = self
            .params
            .iter()
            .copied()
            .filter(|kv| !without.contains(&kv.split('=').next().unwrap_or(kv)))
            .chain(extra.iter().map(String::as_str))
            .collect::<Vec<_>>();
        if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        }
    }
}

/// One `PgConnectOptions` per host of a multi-host URL.
pub(super) fn hosts(url: &str) -> Result<Vec<PgConnectOptions>, MultiHostError> {
    let bad = |why: &'static str| MultiHostError::Url(why);
    let parts = UrlParts::of(url);
    if parts.scheme.is_empty() {
        return Err(bad("no scheme"));
    }
    if parts.scheme != "postgres" && parts.scheme != "postgresql" {
        return Err(bad("not a postgres:// URL"));
    }
    let (scheme, user, base) = (parts.scheme, parts.user, parts.base);
    let urls: Vec<String> = match parts.param("host") {
        // libpq's form: the hosts in `host`, their ports in `port` (one for all, or one each).
        Some(list) if parts.hosts.is_empty() => {
            let names: Vec<&str> = list.split(',').filter(|h| !h.is_empty()).collect();
            let ports: Vec<&str> = parts
                .param("port")
                .map_or(Vec::new(), |p| p.split(',').collect());
            if ports.len() > 1 && ports.len() != names.len() {
                return Err(bad("give one port for every host, or one for all"));
            }
            names
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let mut extra = vec![format!("host={name}")];
                    if let Some(port) = ports.get(i).or(ports.first()) {
                        extra.push(format!("port={port}"));
                    }
                    let query = parts.query(&["target_session_attrs", "host", "port"], &extra);
                    // A URL with a user needs a host to parse; the parameters override it.
                    format!("{scheme}://{user}localhost{base}{query}")
                })
                .collect()
        }
        _ => {
            let query = parts.query(&["target_session_attrs"], &[]);
            parts
                .hosts
                .split(',')
                .filter(|h| !h.is_empty())
                .map(|host| format!("{scheme}://{user}{host}{base}{query}"))
                .collect()
        }
    };
    if urls.is_empty() {
        return Err(bad("no host"));
    }
    urls.iter()
        .map(|url| PgConnectOptions::from_str(url).map_err(|_| bad("a host's URL does not parse")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_of_a_multi_host_url_gets_the_user_database_and_parameters() {
        let hosts = hosts(
            "postgres://app:secret@127.0.0.1:5441,127.0.0.1:5442,db3/shop?target_session_attrs=read-write&application_name=x",
        )
        .unwrap();
        let seen: Vec<_> = hosts
            .iter()
            .map(|h| {
                (
                    h.get_host().to_owned(),
                    h.get_port(),
                    h.get_database().map(str::to_owned),
                    h.get_username().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "127.0.0.1".to_owned(),
                    5441,
                    Some("shop".to_owned()),
                    "app".to_owned()
                ),
                (
                    "127.0.0.1".to_owned(),
                    5442,
                    Some("shop".to_owned()),
                    "app".to_owned()
                ),
                (
                    "db3".to_owned(),
                    5432,
                    Some("shop".to_owned()),
                    "app".to_owned()
                ),
            ]
        );
        assert_eq!(hosts[0].get_application_name(), Some("x"));
    }

    #[test]
    fn a_single_host_url_is_one_host() {
        assert_eq!(hosts("postgresql://h/db").unwrap().len(), 1);
    }

    #[test]
    fn bad_urls_are_refused_without_echoing_them() {
        for (url, why) in [
            ("mysql://root@h/db", "not a postgres:// URL"),
            ("h1,h2/db", "no scheme"),
            ("postgres://u:pw@/db", "no host"),
            (
                "postgres://u:pw@h1:notaport/db",
                "a host's URL does not parse",
            ),
        ] {
            let err = hosts(url).unwrap_err();
            assert_eq!(err, MultiHostError::Url(why), "{url}");
            assert!(!err.to_string().contains("pw"));
        }
    }

    #[test]
    fn only_the_named_parameters_are_dropped() {
        let query = |url: &str, without: &[&str]| UrlParts::of(url).query(without, &[]);
        let tsa = ["target_session_attrs"];
        assert_eq!(
            query("postgres://h/db?target_session_attrs=read-write", &tsa),
            ""
        );
        assert_eq!(
            query("postgres://h/db?a=1&target_session_attrs=any&b=2", &tsa),
            "?a=1&b=2"
        );
        assert_eq!(query("postgres://h/db", &tsa), "");
        // A parameter whose name only starts with a dropped one stays.
        assert_eq!(
            query("postgres://h/db?hostaddr=1&host=2", &["host"]),
            "?hostaddr=1"
        );
    }

    #[test]
    fn hosts_in_the_host_parameter_take_one_port_each_or_one_for_all() {
        let seen = |url: &str| {
            hosts(url)
                .unwrap()
                .iter()
                .map(|h| {
                    (
                        h.get_host().to_owned(),
                        h.get_port(),
                        h.get_database().map(str::to_owned),
                    )
                })
                .collect::<Vec<_>>()
        };
        let one = |host: &str, port| (host.to_owned(), port, Some("shop".to_owned()));
        assert_eq!(
            seen("postgres://app@/shop?host=h1,h2&port=5441,5442&target_session_attrs=read-write"),
            [one("h1", 5441), one("h2", 5442)]
        );
        assert_eq!(
            seen("postgresql:///shop?port=5441&host=h1,h2,h3"),
            [one("h1", 5441), one("h2", 5441), one("h3", 5441)]
        );
        assert_eq!(
            seen("postgres:///shop?host=h1,h2"),
            [one("h1", 5432), one("h2", 5432)]
        );
        assert_eq!(
            hosts("postgres:///shop?host=h1,h2,h3&port=1,2").unwrap_err(),
            MultiHostError::Url("give one port for every host, or one for all")
        );
        for url in [
            "postgres://u:p@h1,h2/db",
            "postgres:///db?host=h1,h2&port=1",
        ] {
            assert!(is_multi_host(url), "{url}");
        }
        for url in [
            "postgres://u:p,w@h:5440/test",
            "postgres://u@h:5440/test?options=a,b",
            "postgres:///test?host=/run/postgresql",
        ] {
            assert!(!is_multi_host(url), "{url}");
        }
    }
}
