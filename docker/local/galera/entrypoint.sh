#!/bin/sh
# Starts one node of a Galera cluster on a user-defined Docker network, then hands over to
# the MariaDB image's entrypoint (root without password from any host, database `test`).
#
#   GALERA_NODES      the nodes' host names on the network, comma-separated
#                     (default node1,node2,node3): wsrep_cluster_address=gcomm://GALERA_NODES
#   GALERA_BOOTSTRAP  1 on the first node only: it starts a new cluster (--wsrep-new-cluster);
#                     the others join it and get its data by rsync state transfer
#
# Extra arguments are passed to mariadbd.
set -eu
case "${1:-}" in
  "" | -*) ;;
  *) exec "$@" ;;
esac
set -- --wsrep-on=ON --wsrep-cluster-address="gcomm://${GALERA_NODES:-node1,node2,node3}" \
  --wsrep-node-name="$(hostname)" "$@"
if [ "${GALERA_BOOTSTRAP:-0}" = 1 ]; then
  set -- --wsrep-new-cluster "$@"
fi
exec /usr/local/bin/docker-entrypoint.sh "$@"
