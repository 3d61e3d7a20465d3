#!/bin/sh
# Starts MariaDB for txretry's tests: no arguments, `mariadbd [--option …]` or just
# `--option …` (as the official image takes them). The data directory is made at build
# time; an empty one (a tmpfs mount) is made at start: root with no password from any
# host, database `test`. Runs the server as the mysql user.
set -eu
DATADIR=/var/lib/mysql

as_mysql() { # runs its arguments as the mysql user
  if [ "$(id -u)" = 0 ]; then
    setpriv --reuid=mysql --regid=mysql --init-groups "$@"
  else
    "$@"
  fi
}

init() {
  [ -d "$DATADIR/mysql" ] && return 0
  [ "$(id -u)" = 0 ] && chown mysql:mysql "$DATADIR" /run/mysqld
  as_mysql mariadb-install-db --datadir="$DATADIR" --auth-root-authentication-method=normal \
    --skip-test-db >/dev/null
  as_mysql mariadbd --datadir="$DATADIR" --skip-networking --socket=/run/mysqld/init.sock &
  pid=$!
  i=0
  until mariadb-admin --socket=/run/mysqld/init.sock -uroot ping >/dev/null 2>&1; do
    i=$((i + 1)); [ "$i" -lt 120 ] || { echo "init server did not start" >&2; exit 1; }
    sleep 0.5
  done
  mariadb --socket=/run/mysqld/init.sock -uroot <<SQL
CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
SET PASSWORD FOR 'root'@'localhost' = PASSWORD('');
CREATE DATABASE IF NOT EXISTS test;
FLUSH PRIVILEGES;
SQL
  mariadb-admin --socket=/run/mysqld/init.sock -uroot shutdown
  wait "$pid" || true
}

if [ "${1:-}" = init ]; then
  init
  exit 0
fi
case "${1:-}" in
  "" | -*) set -- mariadbd "$@" ;;
esac
if [ "$1" = mariadbd ] || [ "$1" = mysqld ]; then
  shift
  init
  set -- mariadbd --datadir="$DATADIR" "$@"
  [ "$(id -u)" = 0 ] && set -- setpriv --reuid=mysql --regid=mysql --init-groups "$@"
fi
exec "$@"
