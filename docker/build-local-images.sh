#!/usr/bin/env bash
# Builds the test servers' images locally, from Debian's packages only (no registry
# images): a minbase Debian bookworm made with debootstrap and `docker import`ed, and on
# top of it Postgres 15, MariaDB 10.11 and PgBouncer. Run as root.
#
#   bash docker/build-local-images.sh            # install docker.io/debootstrap if missing,
#                                               # start dockerd if none answers, build what is missing
#   TXRETRY_REBUILD=1 bash docker/build-local-images.sh   # rebuild all images
#
# Images (override the prefix with TXRETRY_IMAGE_PREFIX, default txretry):
#   txretry/debian:bookworm-local, txretry/postgres:15-local, txretry/mariadb:10.11-local,
#   txretry/pgbouncer:1-local, txretry/galera:10.11-local (MariaDB + galera-4, on the MariaDB
#   image; TXRETRY_SKIP_GALERA=1 skips it)
#
# When this script starts dockerd (vfs storage driver, log in $TXRETRY_DOCKER_STATE/dockerd.log),
# it leaves it running and writes its pid to $TXRETRY_DOCKER_STATE/dockerd.pid, so a caller
# can stop it (`kill "$(cat …/dockerd.pid)"`); .ci/containers does.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
prefix="${TXRETRY_IMAGE_PREFIX:-txretry}"
state="${TXRETRY_DOCKER_STATE:-/var/tmp/txretry-docker}"
mirror="${TXRETRY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
mkdir -p "$state"

log() { printf '[build-local-images %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "build-local-images.sh: $1 needs root" >&2
    exit 1
  fi
}

# 1. Packages: dockerd (docker.io) and debootstrap, from Debian's packages.
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
  need_root "installing ${missing[*]}"
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# docker.io puts its client in /usr/bin; an older client elsewhere on PATH still works.
docker_cli="$(command -v docker || true)"
[ -n "$docker_cli" ] || docker_cli=/usr/bin/docker

# 2. A daemon: use one that answers, else start dockerd in the background.
if "$docker_cli" info >/dev/null 2>&1; then
  log "a Docker daemon answers"
else
  need_root "starting dockerd"
  log "starting dockerd --storage-driver=vfs (log: $state/dockerd.log)"
  nohup dockerd --storage-driver=vfs --data-root="${TXRETRY_DOCKER_ROOT:-/var/lib/docker}" \
    >"$state/dockerd.log" 2>&1 </dev/null &
  echo $! >"$state/dockerd.pid"
  for _ in $(seq 1 120); do
    if "$docker_cli" info >/dev/null 2>&1; then break; fi
    if ! kill -0 "$(cat "$state/dockerd.pid")" 2>/dev/null; then
      echo "dockerd exited; its log:" >&2
      tail -n 30 "$state/dockerd.log" >&2
      exit 1
    fi
    sleep 0.5
  done
  "$docker_cli" info >/dev/null 2>&1 || { echo "dockerd did not answer within 60 s" >&2; tail -n 30 "$state/dockerd.log" >&2; exit 1; }
  log "dockerd answers (pid $(cat "$state/dockerd.pid"))"
fi

have() { [ -z "${TXRETRY_REBUILD:-}" ] && "$docker_cli" image inspect "$1" >/dev/null 2>&1; }

# 3. The base image: debootstrap minbase bookworm, imported.
base="$prefix/debian:bookworm-local"
if have "$base"; then
  log "$base: present"
else
  need_root "debootstrap"
  t0=$SECONDS
  root="$(mktemp -d /var/tmp/txretry-rootfs.XXXXXX)"
  chmod 755 "$root" # mktemp makes it 0700, and it becomes the image's /
  trap 'rm -rf "$root"' EXIT
  log "$base: debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$state/debootstrap.log" 2>&1 \
    || { tail -n 30 "$state/debootstrap.log" >&2; exit 1; }
  cat >"$root/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
SOURCES
  # Small images: no docs, no man pages, no apt caches.
  cat >"$root/etc/dpkg/dpkg.cfg.d/01-txretry-nodoc" <<'NODOC'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
NODOC
  echo 'APT::Install-Recommends "false"; APT::Install-Suggests "false";' \
    >"$root/etc/apt/apt.conf.d/01-txretry-norecommends"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | "$docker_cli" import \
    --change 'ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8' \
    --change 'CMD ["bash"]' - "$base" >/dev/null
  rm -rf "$root"; trap - EXIT
  log "$base: built in $((SECONDS - t0)) s"
fi

# 4. The servers, each a Dockerfile under docker/local/ on the base.
build() { # image, directory, [build argument NAME=VALUE, default BASE=the base image]
  if have "$1"; then
    log "$1: present"
    return
  fi
  local t0=$SECONDS
  log "$1: building from docker/local/$2"
  DOCKER_BUILDKIT=0 "$docker_cli" build -q --build-arg "${3:-BASE=$base}" -t "$1" "$here/local/$2" >"$state/build-$2.log" 2>&1 \
    || { tail -n 40 "$state/build-$2.log" >&2; exit 1; }
  log "$1: built in $((SECONDS - t0)) s"
}
build "$prefix/postgres:15-local" postgres
build "$prefix/mariadb:10.11-local" mariadb
if [ -z "${TXRETRY_SKIP_PGBOUNCER:-}" ]; then
  build "$prefix/pgbouncer:1-local" pgbouncer
fi
if [ -z "${TXRETRY_SKIP_GALERA:-}" ]; then
  build "$prefix/galera:10.11-local" galera "MARIADB=$prefix/mariadb:10.11-local"
fi
log "done"
