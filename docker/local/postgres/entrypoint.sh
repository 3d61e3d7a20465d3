#!/bin/sh
# Starts PostgreSQL 15 the way the official image's entrypoint does for txretry's tests:
# no arguments, `postgres [-c name=value …]` or just `-c …` (testcontainers passes
# `-c fsync=off`). The data directory ($PGDATA) is made at build time; an empty or missing
# one (a tmpfs mount) is made at start. Runs the server as the postgres user.
set -eu
export PATH="/usr/lib/postgresql/15/bin:$PATH"
export PGDATA="${PGDATA:-/var/lib/postgresql/data}"

as_postgres() { # runs its arguments as the postgres user
  if [ "$(id -u)" = 0 ]; then
    setpriv --reuid=postgres --regid=postgres --init-groups "$@"
  else
    "$@"
  fi
}

init() {
  [ -s "$PGDATA/PG_VERSION" ] && return 0
  if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" && chown postgres:postgres "$PGDATA" && chmod 700 "$PGDATA"
  fi
  as_postgres initdb -D "$PGDATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  cat >>"$PGDATA/postgresql.conf" <<CONF
listen_addresses = '*'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
  echo 'host all all all trust' >>"$PGDATA/pg_hba.conf"
  echo 'CREATE DATABASE test' | as_postgres postgres --single -D "$PGDATA" postgres >/dev/null
}

if [ "${1:-}" = init ]; then
  init
  exit 0
fi
case "${1:-}" in
  "" | -*) set -- postgres "$@" ;;
esac
if [ "$1" = postgres ]; then
  shift
  init
  # testcontainers' Postgres module waits for "ready to accept connections" on stderr (the
  # server's log) and then on stdout (where the official image's init-time pg_ctl prints
  # it). Say it on stdout once the server answers on TCP; the waiter exits 0, which the
  # postmaster, its parent after exec, reaps as an unknown child and ignores.
  (
    i=0
    until pg_isready -q -h 127.0.0.1 -p 5432 || [ "$i" -ge 600 ]; do i=$((i + 1)); sleep 0.1; done
    echo "docker-entrypoint: database system is ready to accept connections"
    exit 0
  ) &
  set -- postgres -D "$PGDATA" "$@"
  [ "$(id -u)" = 0 ] && set -- setpriv --reuid=postgres --regid=postgres --init-groups "$@"
fi
exec "$@"
