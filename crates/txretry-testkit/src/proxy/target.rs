//! The upstream server a proxy forwards to, read from the caller's URL, and the URL the
//! caller connects to instead.

use std::io;

/// The wire protocol a server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Protocol {
    Postgres,
    Mysql,
}

/// The upstream server, and the caller's URL cut around its host and port.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) protocol: Protocol,
    pub(super) host: String,
    pub(super) port: u16,
    /// `scheme://user:password@`, up to where the host starts.
    before_host: String,
    /// `/database?options`, from where the port ends (for MySQL, with
    /// `prefer_socket=false`).
    after_port: String,
}

impl Target {
    pub(super) fn parse(url: &str) -> io::Result<Self> {
        let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{why}: {url}"));
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("not a URL"))?;
        let (protocol, default_port) = match scheme.to_ascii_lowercase().as_str() {
            "postgres" | "postgresql" => (Protocol::Postgres, 5432),
            "mysql" | "mariadb" => (Protocol::Mysql, 3306),
            _ => return Err(bad("not a postgres:// or mysql:// URL")),
        };
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        // The password may hold '@' only percent-encoded, but look for the last one anyway.
        let host_start = authority.rfind('@').map_or(0, |at| at + 1);
        let host_port = &authority[host_start..];
        if host_port.contains(',') {
            return Err(bad("the proxy serves a single host, not a list"));
        }
        let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| bad("unclosed '[' in the host"))?;
            match after {
                "" => (host, None),
                _ => (
                    host,
                    Some(
                        after
                            .strip_prefix(':')
                            .ok_or_else(|| bad("junk after the host"))?,
                    ),
                ),
            }
        } else {
            match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            }
        };
        if host.is_empty() {
            return Err(bad("the proxy needs a TCP host in the URL"));
        }
        let port = match port {
            Some(port) => port.parse().map_err(|_| bad("not a port number"))?,
            None => default_port,
        };
        Ok(Self {
            protocol,
            host: host.to_owned(),
            port,
            before_host: format!("{scheme}://{}", &authority[..host_start]),
            after_port: match protocol {
                Protocol::Postgres => rest[authority_end..].to_owned(),
                Protocol::Mysql => stay_on_tcp(&rest[authority_end..]),
            },
        })
    }

    pub(super) fn url_via(&self, port: u16) -> String {
        format!("{}127.0.0.1:{port}{}", self.before_host, self.after_port)
    }
}

/// Sets `prefer_socket=false` in the query of a MySQL URL's `/database?options` tail.
///
/// mysql_async's default on Unix, for a server on 127.0.0.1, is to ask it for its Unix socket
/// (`SELECT @@socket`) and reconnect there, which would leave the proxy out of every later
/// query. sqlx ignores the option.
fn stay_on_tcp(tail: &str) -> String {
    let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
    let mut params: Vec<&str> = query
        .split('&')
        .filter(|param| !param.is_empty() && param.split('=').next() != Some("prefer_socket"))
        .collect();
    params.push("prefer_socket=false");
    format!("{path}?{}", params.join("&"))
}

#[cfg(test)]
mod tests {
    use super::{Protocol, Target};

    #[test]
    fn swaps_the_host_and_port_and_keeps_the_rest() {
        let t =
            Target::parse("postgres://postgres:pw@db.example:6543/test?sslmode=prefer").unwrap();
        assert_eq!(t.protocol, Protocol::Postgres);
        assert_eq!((t.host.as_str(), t.port), ("db.example", 6543));
        assert_eq!(
            t.url_via(1),
            "postgres://postgres:pw@127.0.0.1:1/test?sslmode=prefer"
        );

        let t = Target::parse("mysql://root@127.0.0.1/test").unwrap();
        assert_eq!(t.protocol, Protocol::Mysql);
        assert_eq!(t.port, 3306);
        assert_eq!(
            t.url_via(2),
            "mysql://root@127.0.0.1:2/test?prefer_socket=false"
        );

        let t = Target::parse("mysql://root@localhost:3307/test?prefer_socket=true&a=b").unwrap();
        assert_eq!(
            t.url_via(2),
            "mysql://root@127.0.0.1:2/test?a=b&prefer_socket=false"
        );

        let t = Target::parse("postgresql://[::1]:5433").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 5433));
        assert_eq!(t.url_via(3), "postgresql://127.0.0.1:3");
    }

    #[test]
    fn refuses_what_it_cannot_proxy() {
        for url in [
            "sqlite://x.db",
            "postgres:///test?host=/run/postgresql",
            "postgres://a:1,b:2/test",
            "mysql://root@host:notaport/test",
            "no url",
        ] {
            assert!(Target::parse(url).is_err(), "{url}");
        }
    }
}
