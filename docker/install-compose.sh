#!/usr/bin/env bash
# Installs Docker Compose v2 (the `docker compose` CLI plugin) from Debian's packages when
# `docker compose` does not answer. Bookworm has only Compose v1 (the Python
# `docker-compose`, no `--wait`); trixie's `docker-compose` package is Compose v2, a static
# Go binary that needs nothing newer than bookworm's libc. It is fetched the way apt would
# fetch it: trixie's InRelease checked with gpgv against the installed Debian archive
# keyring, then the Packages index and the .deb checked against the SHA-256 sums the signed
# file lists. Only the plugin binary is installed, into /usr/libexec/docker/cli-plugins
# (where the docker CLI looks for it); nothing else on the system changes. Run as root.
#
#   bash docker/install-compose.sh
set -euo pipefail

mirror="${TXRETRY_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
suite=trixie
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
plugin_dir=/usr/libexec/docker/cli-plugins

log() { printf '[install-compose %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

if docker compose version >/dev/null 2>&1; then
  log "already there: $(docker compose version)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-compose.sh: installing into $plugin_dir needs root" >&2
  exit 1
fi

arch="$(dpkg --print-architecture)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The one signed file; every other download is checked against a sum it vouches for.
curl -fsS -o "$work/InRelease" "$mirror/dists/$suite/InRelease"
gpgv --keyring "$keyring" --output "$work/Release" "$work/InRelease" 2>"$work/gpgv.log" || {
  cat "$work/gpgv.log" >&2
  echo "install-compose.sh: $suite's InRelease does not verify against $keyring" >&2
  exit 1
}

index="main/binary-$arch/Packages.xz"
index_sum="$(awk -v f="$index" '/^SHA256:/ { s = 1; next } /^[^ ]/ { s = 0 } s && $3 == f { print $1 }' "$work/Release")"
[ -n "$index_sum" ] || { echo "install-compose.sh: $index not listed in $suite's Release" >&2; exit 1; }
curl -fsS -o "$work/Packages.xz" "$mirror/dists/$suite/$index"
echo "$index_sum  $work/Packages.xz" | sha256sum --quiet -c -

# awk reads to the end: stopping early would cut xz's pipe, and pipefail would fail the script.
stanza="$(xz -dc "$work/Packages.xz" | awk '/^Package: docker-compose$/ { p = 1 } /^$/ { p = 0 } p')"
filename="$(printf '%s\n' "$stanza" | sed -n 's/^Filename: //p')"
deb_sum="$(printf '%s\n' "$stanza" | sed -n 's/^SHA256: //p')"
version="$(printf '%s\n' "$stanza" | sed -n 's/^Version: //p')"
[ -n "$filename" ] && [ -n "$deb_sum" ] || {
  echo "install-compose.sh: no docker-compose package for $arch in $suite" >&2
  exit 1
}

log "docker-compose $version from $suite ($filename)"
curl -fsS -o "$work/compose.deb" "$mirror/$filename"
echo "$deb_sum  $work/compose.deb" | sha256sum --quiet -c -
dpkg-deb -x "$work/compose.deb" "$work/root"
install -D -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" \
  "$plugin_dir/docker-compose"
log "installed: $(docker compose version)"
