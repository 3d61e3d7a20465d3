//! Connecting host by host, each attempt bounded by `connect_timeout` as a whole.
//!
//! tokio-postgres bounds only a host's TCP connect with `connect_timeout`; the TLS
//! handshake, the startup and the `target_session_attrs` check after it have no bound. A
//! frozen host (a primary stopped, or cut off, while the kernel still accepts
//! connections) then holds the connect for ever, and the hosts after it are never tried:
//! the failover that promoted one of them cannot be followed. libpq applies
//! `connect_timeout` to each host's whole attempt; so does this, by connecting to one host
//! at a time.

use std::time::Duration;

use tokio_postgres::config::{Host, LoadBalanceHosts};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Connection, Error, Socket};

/// Connects to the first host of `config` that answers in time, in the config's order
/// (shuffled under `load_balance_hosts=random`). Without `connect_timeout`, as
/// tokio-postgres does (no bound, as libpq).
///
/// # Errors
/// The last host's error; a host that did not answer within `connect_timeout` gives
/// tokio-postgres's timeout error ("timeout waiting for server").
pub(crate) async fn connect<T>(
    config: &Config,
    tls: &T,
) -> Result<(Client, Connection<Socket, T::Stream>), Error>
where
    T: MakeTlsConnect<Socket> + Clone,
{
    let Some(&timeout) = config.get_connect_timeout() else {
        return config.connect(tls.clone()).await;
    };
    let mut order: Vec<usize> = (0..host_count(config)).collect();
    if config.get_load_balance_hosts() == LoadBalanceHosts::Random {
        fastrand::shuffle(&mut order);
    }
    let mut last = None;
    for i in order {
        match bounded(&one_host(config, i), tls, timeout).await {
            Ok(connected) => return Ok(connected),
            Err(error) => last = Some(error),
        }
    }
    // No host at all: tokio-postgres's own error for that.
    match last {
        Some(error) => Err(error),
        None => config.connect(tls.clone()).await,
    }
}

/// `config`'s connect, given up after `timeout`.
async fn bounded<T>(
    config: &Config,
    tls: &T,
    timeout: Duration,
) -> Result<(Client, Connection<Socket, T::Stream>), Error>
where
    T: MakeTlsConnect<Socket> + Clone,
{
    match tokio::time::timeout(timeout, config.connect(tls.clone())).await {
        Ok(connected) => connected,
        // tokio-postgres makes no other error of a timeout public; this is the one its
        // blocking `postgres` crate gives for the same thing.
        Err(_) => Err(Error::__private_api_timeout()),
    }
}

/// How many hosts `config` names: its hosts, or its `hostaddr`s when it names no host.
fn host_count(config: &Config) -> usize {
    config.get_hosts().len().max(config.get_hostaddrs().len())
}

/// `config` with its `i`th host only (its host, its `hostaddr`, its port) and every other
/// setting kept.
fn one_host(config: &Config, i: usize) -> Config {
    let mut one = Config::new();
    if let Some(user) = config.get_user() {
        one.user(user);
    }
    if let Some(password) = config.get_password() {
        one.password(password);
    }
    if let Some(dbname) = config.get_dbname() {
        one.dbname(dbname);
    }
    if let Some(options) = config.get_options() {
        one.options(options);
    }
    if let Some(name) = config.get_application_name() {
        one.application_name(name);
    }
    one.ssl_mode(config.get_ssl_mode())
        .ssl_negotiation(config.get_ssl_negotiation())
        .keepalives(config.get_keepalives())
        .keepalives_idle(config.get_keepalives_idle())
        .target_session_attrs(config.get_target_session_attrs())
        .channel_binding(config.get_channel_binding());
    if let Some(&timeout) = config.get_connect_timeout() {
        one.connect_timeout(timeout);
    }
    if let Some(&timeout) = config.get_tcp_user_timeout() {
        one.tcp_user_timeout(timeout);
    }
    if let Some(interval) = config.get_keepalives_interval() {
        one.keepalives_interval(interval);
    }
    if let Some(retries) = config.get_keepalives_retries() {
        one.keepalives_retries(retries);
    }
    match config.get_hosts().get(i) {
        Some(Host::Tcp(host)) => {
            one.host(host);
        }
        #[cfg(unix)]
        Some(Host::Unix(path)) => {
            one.host_path(path);
        }
        None => {}
    }
    if let Some(&addr) = config.get_hostaddrs().get(i) {
        one.hostaddr(addr);
    }
    // One port for every host, or one per host.
    let ports = config.get_ports();
    if let Some(&port) = ports.get(i).or(ports.first()) {
        one.port(port);
    }
    one
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every setting a URL can give, on three hosts: the second one alone is the same
    /// config as the URL that names it alone (tokio-postgres's `Debug` shows every field).
    #[test]
    fn one_host_keeps_every_other_setting() {
        let settings = "user=app password=pw dbname=shop options='-c x=1' \
             application_name=svc sslmode=disable connect_timeout=2 tcp_user_timeout=3 \
             keepalives=0 keepalives_idle=40 keepalives_interval=5 keepalives_retries=6 \
             target_session_attrs=read-write channel_binding=disable";
        let three: Config = format!(
            "host=db1,db2,/run/pg hostaddr=10.0.0.1,10.0.0.2,10.0.0.3 port=5432,6543,7654 \
             {settings}"
        )
        .parse()
        .unwrap();
        let alone: Config = format!("host=db2 hostaddr=10.0.0.2 port=6543 {settings}")
            .parse()
            .unwrap();
        assert_eq!(format!("{:?}", one_host(&three, 1)), format!("{alone:?}"));
        assert_eq!(host_count(&three), 3);
    }

    #[test]
    fn one_port_serves_every_host_and_hostaddrs_alone_count() {
        let config: Config = "hostaddr=10.0.0.1,10.0.0.2 port=6000".parse().unwrap();
        assert_eq!(host_count(&config), 2);
        let second = one_host(&config, 1);
        assert_eq!(
            second.get_hostaddrs(),
            ["10.0.0.2".parse::<std::net::IpAddr>().unwrap()]
        );
        assert_eq!(second.get_ports(), [6000]);
        assert!(second.get_hosts().is_empty());
    }
}
