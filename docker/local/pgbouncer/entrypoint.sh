#!/bin/sh
# Writes pgbouncer.ini from the environment and runs PgBouncer in the foreground as the
# postgres user, logging to stderr ("process up" once it listens).
set -eu
conf=/var/run/pgbouncer/pgbouncer.ini
cat >"$conf" <<INI
[databases]
* = host=${PGBOUNCER_UPSTREAM_HOST:-postgres} port=${PGBOUNCER_UPSTREAM_PORT:-5432} user=postgres

[pgbouncer]
listen_addr = ${PGBOUNCER_LISTEN_ADDR:-0.0.0.0}
listen_port = ${PGBOUNCER_LISTEN_PORT:-6432}
unix_socket_dir =
auth_type = trust
auth_file = /var/run/pgbouncer/userlist.txt
pool_mode = ${PGBOUNCER_POOL_MODE:-transaction}
max_client_conn = 500
default_pool_size = ${PGBOUNCER_POOL_SIZE:-20}
ignore_startup_parameters = extra_float_digits,options
server_reset_query =
logfile =
INI
echo '"postgres" ""' >/var/run/pgbouncer/userlist.txt
chown postgres:postgres "$conf" /var/run/pgbouncer/userlist.txt 2>/dev/null || true
if [ "$(id -u)" = 0 ]; then
  exec setpriv --reuid=postgres --regid=postgres --init-groups pgbouncer "$conf" "$@"
fi
exec pgbouncer "$conf" "$@"
