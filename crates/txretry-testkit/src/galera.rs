//! A three-node Galera cluster (MariaDB 10.11 + galera-4) for the tests of a distributed
//! engine: `TXRETRY_GALERA_URLS`, else three containers of `TXRETRY_GALERA_IMAGE` (default
//! `txretry/galera:10.11-local`, made by docker/build-local-images.sh; docker/local/galera)
//! on a Docker network of their own.

use std::sync::OnceLock;
use std::time::Duration;

use testcontainers_modules::testcontainers::core::{ContainerPort, ExecCommand, WaitFor};
use testcontainers_modules::testcontainers::{Container, GenericImage, ImageExt};

use crate::containers;

/// How many nodes the cluster has.
const NODES: usize = 3;

/// Three `mysql://` URLs, one per node of a Galera cluster, or `None` (after printing why)
/// when the test should skip.
///
/// `TXRETRY_GALERA_URLS` (comma-separated) when set; else, when a Docker daemon answers, a
/// cluster started once per test binary and removed (containers and network) when the
/// binary exits: node 1 bootstraps it, nodes 2 and 3 join by rsync state transfer, and the
/// URLs are returned once every node reports `wsrep_cluster_size=3` and `Synced`. A cluster
/// is optional: a missing one skips, and fails only with `TXRETRY_REQUIRE_GALERA=1`.
pub fn galera_cluster(test: &str) -> Option<Vec<String>> {
    static STARTED: OnceLock<Result<String, String>> = OnceLock::new();
    let urls = crate::server_url(
        test,
        "TXRETRY_GALERA_URLS",
        "TXRETRY_REQUIRE_GALERA",
        &STARTED,
        start,
    )?;
    Some(
        urls.split(',')
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

/// Starts the cluster; its nodes' URLs, comma-separated.
fn start() -> Result<String, String> {
    let (name, tag) = containers::image("TXRETRY_GALERA_IMAGE", ("txretry/galera", "10.11-local"));
    // Names unique to this process: test binaries may each start a cluster at once.
    let network = format!("txretry-galera-{}", std::process::id());
    let hosts: Vec<String> = (1..=NODES).map(|i| format!("{network}-{i}")).collect();
    let mut nodes = Vec::with_capacity(NODES);
    for (i, host) in hosts.iter().enumerate() {
        let request = GenericImage::new(&name, &tag)
            .with_exposed_port(ContainerPort::Tcp(3306))
            // A joiner prints it once its state transfer is done.
            .with_wait_for(WaitFor::message_on_stderr("ready for connections"))
            .with_network(&network)
            .with_container_name(host)
            .with_hostname(host)
            .with_env_var("GALERA_NODES", hosts.join(","))
            .with_env_var("GALERA_BOOTSTRAP", if i == 0 { "1" } else { "0" })
            .with_startup_timeout(Duration::from_secs(120));
        let node = containers::run(request, "galera")?;
        if i == 0 {
            // testcontainers made the network; removing the containers leaves it, so one
            // more reaper removes them all and then the network. The daemon may still be
            // detaching the removed containers' endpoints ("active endpoints"): retry.
            containers::at_exit(
                "net=$1; shift; docker rm -f -v \"$@\"; \
                 for _ in 1 2 3 4 5 6 7 8 9 10; do \
                 docker network rm \"$net\" && exit 0; sleep 1; done",
                &[network.as_str()]
                    .into_iter()
                    .chain(hosts.iter().map(String::as_str))
                    .collect::<Vec<_>>(),
                "galera network",
                &format!("docker network rm {network}"),
            );
        }
        nodes.push(node);
    }
    let mut urls = Vec::with_capacity(NODES);
    for node in &nodes {
        wait_synced(node)?;
        let port = node
            .get_host_port_ipv4(ContainerPort::Tcp(3306))
            .map_err(|e| e.to_string())?;
        urls.push(format!("mysql://root@127.0.0.1:{port}/test"));
    }
    // Never dropped: the reapers remove them when the process exits.
    nodes.into_iter().for_each(std::mem::forget);
    Ok(urls.join(","))
}

/// Waits (up to a minute) until `node` is `Synced` in a cluster of [`NODES`].
fn wait_synced(node: &Container<GenericImage>) -> Result<(), String> {
    let query = "SHOW GLOBAL STATUS WHERE Variable_name IN \
                 ('wsrep_cluster_size', 'wsrep_local_state_comment')";
    let mut last = String::new();
    for _ in 0..120 {
        let mut exec = node
            .exec(ExecCommand::new([
                "mariadb", "-uroot", "-N", "-B", "-e", query,
            ]))
            .map_err(|e| format!("galera node {}: {e}", node.id()))?;
        last =
            String::from_utf8_lossy(&exec.stdout_to_vec().map_err(|e| e.to_string())?).into_owned();
        let status = |name: &str| {
            last.lines()
                .filter_map(|line| line.split_once('\t'))
                .find(|(n, _)| *n == name)
                .map(|(_, value)| value.trim().to_owned())
        };
        if status("wsrep_cluster_size").as_deref() == Some(&NODES.to_string())
            && status("wsrep_local_state_comment").as_deref() == Some("Synced")
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Err(format!(
        "galera node {} did not reach {NODES} nodes, Synced; last status: {last:?}",
        node.id()
    ))
}
