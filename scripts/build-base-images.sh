#!/usr/bin/env bash
# Builds local equivalents of the two base images the production deployment names, for machines
# that cannot pull them (no container registry), from Debian's packages and the project's own Node:
#
#   classroom-base/node:24       ~ node:24-bookworm-slim: a minimal Debian bookworm root
#                                (debootstrap --variant=minbase, with bookworm's updates), the
#                                project's pinned Node 24 (node_modules/.bin/node, the npm package
#                                `node`) as /usr/local/bin/node, this machine's npm as npm and npx,
#                                the user node (1000:1000), and the official image's entrypoint
#                                behaviour (a first argument that is no command runs under node).
#   classroom-base/postgres:15   ~ postgres:15: the same Debian root with Debian's postgresql-15
#                                (bookworm's PostgreSQL, as scripts/provision.sh installs it), the
#                                user postgres (999:999), PGDATA=/var/lib/postgresql/data as a
#                                volume, and an entrypoint with the official image's contract:
#                                POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, POSTGRES_INITDB_ARGS,
#                                POSTGRES_HOST_AUTH_METHOD (and their *_FILE forms),
#                                /docker-entrypoint-initdb.d/*.sql|*.sql.gz|*.sh on first start only,
#                                the server run as postgres, STOPSIGNAL SIGINT.
#   classroom-base/haproxy:2.6   ~ haproxy:2.6: the same Debian root with Debian's haproxy (2.6),
#                                run as the user haproxy, the configuration at
#                                /usr/local/etc/haproxy/haproxy.cfg, the master-worker mode in the
#                                foreground (-W -db), STOPSIGNAL SIGUSR1 (a soft stop: open
#                                connections finish). compose.replicas.yaml's load balancer.
#
# Use them with NODE_IMAGE=classroom-base/node:24 (Dockerfile build argument) and
# POSTGRES_IMAGE=classroom-base/postgres:15 (compose.yaml), HAPROXY_IMAGE=classroom-base/haproxy:2.6
# (compose.replicas.yaml). Tags: NODE_BASE_IMAGE_TAG, POSTGRES_BASE_IMAGE_TAG, HAPROXY_BASE_IMAGE_TAG. Mirrors: this machine's apt sources, or BASE_DEBIAN_MIRROR and
# BASE_DEBIAN_SECURITY_MIRROR.
#
# Idempotent: each image carries the label service.base-image-hash=<hash of its inputs>; when all
# tags have their current hash nothing happens (well under a second, no output). The Debian roots
# (about a minute: debootstrap, apt) are kept as images classroom-base/stage:{debian,postgres,haproxy}-<hash
# of the function that makes them>, so that editing an entrypoint rebuilds in seconds. Building needs
# root (debootstrap, chroot); checking that the images are up to date needs neither. Concurrent runs
# are serialised with flock. One line per phase; on failure the tail of the failing step's log.
# Nothing of the caller's environment but the settings named here reaches a build step
# (scripts/lib.sh, clean_environment).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=build-base-images
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
clean_environment "$ROOT/scripts/$(basename "$0")" NODE_BASE_IMAGE_TAG POSTGRES_BASE_IMAGE_TAG HAPROXY_BASE_IMAGE_TAG BASE_DEBIAN_MIRROR BASE_DEBIAN_SECURITY_MIRROR BASE_IMAGES_CACHE

NODE_TAG="${NODE_BASE_IMAGE_TAG:-classroom-base/node:24}"
PG_TAG="${POSTGRES_BASE_IMAGE_TAG:-classroom-base/postgres:15}"
HAPROXY_TAG="${HAPROXY_BASE_IMAGE_TAG:-classroom-base/haproxy:2.6}"
SUITE=bookworm
PG_MAJOR=15
HASH_LABEL=service.base-image-hash
STAGE_REPO=classroom-base/stage

command -v docker >/dev/null 2>&1 || die "docker is missing: install Docker Engine (scripts/provision.sh does)"
[ -x "$ROOT/node_modules/.bin/node" ] || die "no Node in node_modules/.bin: run npm install first"
NODE_BIN="$(readlink -f "$ROOT/node_modules/.bin/node")"
NODE_VERSION="$("$NODE_BIN" --version)"
NODE_VERSION="${NODE_VERSION#v}"
case "$NODE_VERSION" in 24.*) ;; *) die "node_modules/.bin/node is Node $NODE_VERSION, not 24: run npm install" ;; esac
# npm is JavaScript: the machine's own (the one that installed this project) runs on Node 24 too.
NPM_DIR=""
if command -v npm >/dev/null 2>&1; then NPM_DIR="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"; fi
[ -f "$NPM_DIR/package.json" ] || die "npm is missing on this machine (Debian package npm, or Node.js with npm)"
NPM_VERSION="$(sed -n 's/^  "version": "\([^"]*\)".*/\1/p' "$NPM_DIR/package.json" | head -n 1)"
DEB_ARCH="$(dpkg --print-architecture 2>/dev/null || echo unknown)"

# ---- the Debian roots (their source text is part of their cache key) ---------------------------

# build_roots DIR: DIR/debian, a minimal bookworm root with its updates, DIR/postgres, the same
# with postgresql-$PG_MAJOR, and DIR/haproxy, the same with haproxy; all without apt's lists and
# caches, documentation, manuals or locales.
build_roots() {
  local r="$1/debian" p="$1/postgres" h="$1/haproxy"
  mkdir -p "$1"
  debootstrap --variant=minbase --arch="$DEB_ARCH" "$SUITE" "$r" "$MIRROR" >>"$LOG" 2>&1 || fail "debootstrap $SUITE from $MIRROR failed"
  # What Debian's slim images leave out, also for every package installed from now on.
  cat >"$r/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  # No service may start inside the chroot (postgresql's postinst tries).
  printf '#!/bin/sh\nexit 101\n' >"$r/usr/sbin/policy-rc.d"
  chmod 0755 "$r/usr/sbin/policy-rc.d"
  printf '%s\n' "$SOURCES_LIST" >"$r/etc/apt/sources.list"
  apt-config dump 2>/dev/null | grep -i '^Acquire::[a-z]*::Proxy' >"$r/etc/apt/apt.conf.d/99build-proxy" || true
  mount -t proc proc "$r/proc"
  MOUNTED="$r/proc"
  {
    chroot "$r" apt-get update -q &&
      chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade
  } >>"$LOG" 2>&1 || fail "apt-get upgrade in the $SUITE chroot failed"
  umount "$r/proc"
  MOUNTED=""
  cp -a "$r" "$p"
  cp -a "$r" "$h"

  # PostgreSQL as the official image installs it: a fixed uid, no cluster made by the package
  # (the entrypoint makes one in PGDATA), listening on every address of the container.
  mount -t proc proc "$p/proc"
  MOUNTED="$p/proc"
  {
    chroot "$p" groupadd --system --gid 999 postgres &&
      chroot "$p" useradd --system --uid 999 --gid 999 --home-dir /var/lib/postgresql --shell /bin/bash postgres &&
      install -d -o 999 -g 999 -m 0755 "$p/var/lib/postgresql" &&
      chroot "$p" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql-common &&
      sed -ri 's/#(create_main_cluster) .*$/\1 = false/' "$p/etc/postgresql-common/createcluster.conf" &&
      chroot "$p" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "postgresql-$PG_MAJOR" &&
      sed -ri "s!^#?(listen_addresses)\s*=\s*\S+.*!\1 = '*'!" "$p/usr/share/postgresql/$PG_MAJOR/postgresql.conf.sample" &&
      grep -qF "listen_addresses = '*'" "$p/usr/share/postgresql/$PG_MAJOR/postgresql.conf.sample" &&
      install -d -o 999 -g 999 -m 3777 "$p/var/run/postgresql" &&
      install -d -o 999 -g 999 -m 1777 "$p/var/lib/postgresql/data" &&
      install -d -m 0755 "$p/docker-entrypoint-initdb.d"
  } >>"$LOG" 2>&1 || fail "installing postgresql-$PG_MAJOR in the $SUITE chroot failed"
  umount "$p/proc"
  MOUNTED=""

  # HAProxy as the official image runs it: its configuration where that image has it.
  mount -t proc proc "$h/proc"
  MOUNTED="$h/proc"
  {
    chroot "$h" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends haproxy &&
      install -d -m 0755 "$h/usr/local/etc/haproxy" &&
      install -d -o "$(chroot "$h" id -u haproxy)" -g "$(chroot "$h" id -g haproxy)" -m 0755 "$h/var/lib/haproxy"
  } >>"$LOG" 2>&1 || fail "installing haproxy in the $SUITE chroot failed"
  umount "$h/proc"
  MOUNTED=""

  local d
  for d in "$r" "$p" "$h"; do
    # Installed by debootstrap before the dpkg filters were in place, and build leftovers.
    find "$d/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
    find "$d/usr/share/doc" -mindepth 1 -type d -empty -delete
    find "$d/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
    rm -rf "$d"/usr/share/man/* "$d"/usr/share/info/* "$d"/usr/share/lintian/* \
      "$d"/var/lib/apt/lists/* "$d"/var/cache/apt/*.bin "$d"/var/cache/apt/archives/*.deb \
      "$d"/var/cache/debconf/*-old "$d"/var/lib/dpkg/*-old "$d"/var/log/* "$d"/tmp/* "$d"/var/tmp/* \
      "$d/usr/sbin/policy-rc.d" "$d/etc/apt/apt.conf.d/99build-proxy"
    # Docker provides these at run time.
    : >"$d/etc/resolv.conf"
    : >"$d/etc/hostname"
  done
}

# ---- the images on top (their text is part of the images' hash) -------------------------------

# The official node image's entrypoint behaviour: `docker run <image> -e 1` or `<image> app.js`
# run under node; a command on PATH runs as it is. (Single quotes: expanded in the container.)
# shellcheck disable=SC2016
NODE_ENTRYPOINT='#!/bin/sh
set -e
if [ "${1#-}" != "$1" ] || [ -z "$(command -v "$1" || true)" ] || { [ -f "$1" ] && ! [ -x "$1" ]; }; then
  set -- node "$@"
fi
exec "$@"'

NODE_DOCKERFILE="FROM $STAGE_REPO:debian-KEY
ENV NODE_VERSION=$NODE_VERSION
COPY node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN groupadd --gid 1000 node \\
 && useradd --uid 1000 --gid node --shell /bin/bash --create-home node \\
 && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
 && node --version && npm --version >/dev/null
ENTRYPOINT [\"docker-entrypoint.sh\"]
CMD [\"node\"]"

# The official postgres image's contract, in short: see the header. Runs as root only to give
# PGDATA to postgres, then again as postgres. (Single quotes: expanded in the container.)
# shellcheck disable=SC2016
PG_ENTRYPOINT='#!/usr/bin/env bash
set -Eeuo pipefail

# VAR from VAR_FILE when that is set (Docker secrets), as the official image does.
file_env() {
  local var="$1" file_var="${1}_FILE" default="${2:-}"
  if [ -n "${!var:-}" ] && [ -n "${!file_var:-}" ]; then
    echo "error: both $var and $file_var are set (but are exclusive)" >&2
    exit 1
  fi
  local value="$default"
  if [ -n "${!var:-}" ]; then value="${!var}"; elif [ -n "${!file_var:-}" ]; then value="$(<"${!file_var}")"; fi
  export "$var"="$value"
  unset "$file_var"
}

if [ "${1:0:1}" = "-" ]; then set -- postgres "$@"; fi

if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown -R postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 0700 "$PGDATA"
  chmod 3777 /var/run/postgresql
  exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
  file_env POSTGRES_USER postgres
  file_env POSTGRES_PASSWORD
  file_env POSTGRES_DB "$POSTGRES_USER"
  file_env POSTGRES_INITDB_ARGS
  : "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"
  if [ -z "$POSTGRES_PASSWORD" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != trust ]; then
    echo "error: the database is uninitialized and POSTGRES_PASSWORD is not set" >&2
    echo "       (set it, or POSTGRES_HOST_AUTH_METHOD=trust to allow every connection without one)" >&2
    exit 1
  fi
  mkdir -p "$PGDATA"
  chmod 0700 "$PGDATA" 2>/dev/null || true
  echo "initializing the database in $PGDATA"
  # shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of arguments
  initdb --username="$POSTGRES_USER" --pwfile=<(printf "%s\n" "$POSTGRES_PASSWORD") $POSTGRES_INITDB_ARGS >/dev/null
  printf "\nhost all all all %s\n" "$POSTGRES_HOST_AUTH_METHOD" >>"$PGDATA/pg_hba.conf"
  # A server on the Unix socket only, so that nobody connects before the database is made.
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=" -w -t 60 start >/dev/null
  psql=(psql -X -q -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password)
  if [ "$POSTGRES_DB" != postgres ]; then
    "${psql[@]}" --dbname postgres --set db="$POSTGRES_DB" <<<"CREATE DATABASE :\"db\";"
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      # shellcheck source=/dev/null
      *.sh) echo "running $f"; if [ -x "$f" ]; then "$f"; else . "$f"; fi ;;
      *.sql) echo "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
      *.sql.gz) echo "running $f"; gunzip -c "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
      *) [ -e "$f" ] && echo "ignoring $f" ;;
    esac
  done
  pg_ctl -D "$PGDATA" -m fast -w -t 60 stop >/dev/null
  unset POSTGRES_PASSWORD
  echo "database initialized: user $POSTGRES_USER, database $POSTGRES_DB"
fi

exec "$@"'

# The official haproxy image's contract: the configuration at /usr/local/etc/haproxy/haproxy.cfg, run
# as haproxy in master-worker mode in the foreground, a soft stop on SIGUSR1.
HAPROXY_DOCKERFILE="FROM $STAGE_REPO:haproxy-KEY
RUN haproxy -v
USER haproxy
WORKDIR /var/lib/haproxy
STOPSIGNAL SIGUSR1
CMD [\"haproxy\", \"-W\", \"-db\", \"-f\", \"/usr/local/etc/haproxy/haproxy.cfg\"]"

PG_DOCKERFILE="FROM $STAGE_REPO:postgres-KEY
ENV PG_MAJOR=$PG_MAJOR LANG=C.UTF-8 PGDATA=/var/lib/postgresql/data \\
    PATH=/usr/lib/postgresql/$PG_MAJOR/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN postgres --version
VOLUME /var/lib/postgresql/data
STOPSIGNAL SIGINT
EXPOSE 5432
ENTRYPOINT [\"docker-entrypoint.sh\"]
CMD [\"postgres\"]"

# ---- keys --------------------------------------------------------------------------------------
ROOTS_KEY="$({
  echo "roots $SUITE $DEB_ARCH postgresql-$PG_MAJOR haproxy"
  declare -f build_roots
} | hash16)"
NODE_DOCKERFILE="${NODE_DOCKERFILE/debian-KEY/debian-$ROOTS_KEY}"
PG_DOCKERFILE="${PG_DOCKERFILE/postgres-KEY/postgres-$ROOTS_KEY}"
HAPROXY_DOCKERFILE="${HAPROXY_DOCKERFILE/haproxy-KEY/haproxy-$ROOTS_KEY}"
NODE_HASH="$({
  # The binary by its content (CRC and size), not its path: every clone of the project has its own path.
  echo "node $ROOTS_KEY $NODE_VERSION npm $NPM_VERSION $(cksum <"$NODE_BIN")"
  printf '%s\n' "$NODE_DOCKERFILE" "$NODE_ENTRYPOINT"
} | hash16)"
PG_HASH="$({
  echo "postgres $ROOTS_KEY"
  printf '%s\n' "$PG_DOCKERFILE" "$PG_ENTRYPOINT"
} | hash16)"
HAPROXY_HASH="$({
  echo "haproxy $ROOTS_KEY"
  printf '%s\n' "$HAPROXY_DOCKERFILE"
} | hash16)"

# ---- up to date? -------------------------------------------------------------------------------
# up_to_date TAG HASH: the tag has the hash. (Not "any image with the label": every image built
# FROM these inherits it.)
up_to_date() { image_up_to_date "$HASH_LABEL" "$1" "$2"; }
all_up_to_date() { up_to_date "$NODE_TAG" "$NODE_HASH" && up_to_date "$PG_TAG" "$PG_HASH" && up_to_date "$HAPROXY_TAG" "$HAPROXY_HASH"; }
docker info >/dev/null 2>&1 || die "Docker Engine does not answer: start dockerd (scripts/provision.sh does)"
all_up_to_date && exit 0

[ "$(id -u)" = 0 ] || die "$NODE_TAG, $PG_TAG and $HAPROXY_TAG need building, which needs root (debootstrap, chroot, apt): run this script as root"
CACHE="${BASE_IMAGES_CACHE:-/var/cache/classroom-base}"
lock_cache
all_up_to_date && exit 0
clear_leftovers

start_ms=$(now_ms)
start_work
stage_exists() { docker image inspect "$STAGE_REPO:$1" >/dev/null 2>&1; }
# import_root DIR TAG: a root directory as a one-layer image (no device nodes: Docker makes /dev).
import_root() {
  tar --numeric-owner -C "$1" -c --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' . |
    docker import --change 'CMD ["bash"]' - "$2" >>"$LOG" 2>&1 || fail "docker import of $2 failed"
}
# build_image TAG HASH CONTEXT: the classic builder (no buildx here), labelled with the hash; the
# tag's previous image is removed when nothing uses it.
build_image() {
  local old
  old="$(docker image inspect --format '{{.Id}}' "$1" 2>/dev/null || true)"
  DOCKER_BUILDKIT=0 docker build --force-rm --label "$HASH_LABEL=$2" -t "$1" "$3" >>"$LOG" 2>&1 || fail "docker build of $1 failed"
  replace_tag "$1" "$old"
  say "built $1 ($(image_size_mb "$1") MB)"
}

if ! stage_exists "debian-$ROOTS_KEY" || ! stage_exists "postgres-$ROOTS_KEY" || ! stage_exists "haproxy-$ROOTS_KEY"; then
  command -v debootstrap >/dev/null 2>&1 || {
    say "installing debootstrap"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; } >>"$LOG" 2>&1 || fail "installing debootstrap failed"
  }
  # The mirrors apt uses on this machine, unless given.
  MIRROR="${BASE_DEBIAN_MIRROR:-$(apt_uri_for "$SUITE")}"
  MIRROR="${MIRROR:-http://deb.debian.org/debian}"
  SECURITY_MIRROR="${BASE_DEBIAN_SECURITY_MIRROR:-$(apt_uri_for "$SUITE-security")}"
  SOURCES_LIST="deb ${MIRROR%/} $SUITE main
deb ${MIRROR%/} $SUITE-updates main"
  [ -z "$SECURITY_MIRROR" ] || SOURCES_LIST+=$'\n'"deb ${SECURITY_MIRROR%/} $SUITE-security main"
  t=$(now_ms)
  say "making the Debian $SUITE roots (debootstrap from $MIRROR, postgresql-$PG_MAJOR, haproxy)"
  build_roots "$WORK/roots"
  import_root "$WORK/roots/debian" "$STAGE_REPO:debian-$ROOTS_KEY"
  import_root "$WORK/roots/postgres" "$STAGE_REPO:postgres-$ROOTS_KEY"
  import_root "$WORK/roots/haproxy" "$STAGE_REPO:haproxy-$ROOTS_KEY"
  rm -rf "$WORK/roots"
  say "Debian roots ready in $(since "$t")"
  # Stages of earlier versions of this script are of no further use.
  docker images --format '{{.Repository}}:{{.Tag}}' "$STAGE_REPO" | grep -v -e "-$ROOTS_KEY\$" | xargs -r docker rmi >/dev/null 2>&1 || true
fi

if ! up_to_date "$NODE_TAG" "$NODE_HASH"; then
  ctx="$WORK/node"
  mkdir -p "$ctx"
  cp -l "$NODE_BIN" "$ctx/node" 2>/dev/null || cp "$NODE_BIN" "$ctx/node"
  cp -r "$NPM_DIR" "$ctx/npm"
  printf '%s\n' "$NODE_ENTRYPOINT" >"$ctx/docker-entrypoint.sh"
  chmod 0755 "$ctx/docker-entrypoint.sh"
  printf '%s\n' "$NODE_DOCKERFILE" >"$ctx/Dockerfile"
  build_image "$NODE_TAG" "$NODE_HASH" "$ctx"
fi

if ! up_to_date "$PG_TAG" "$PG_HASH"; then
  ctx="$WORK/postgres"
  mkdir -p "$ctx"
  printf '%s\n' "$PG_ENTRYPOINT" >"$ctx/docker-entrypoint.sh"
  chmod 0755 "$ctx/docker-entrypoint.sh"
  printf '%s\n' "$PG_DOCKERFILE" >"$ctx/Dockerfile"
  build_image "$PG_TAG" "$PG_HASH" "$ctx"
fi
if ! up_to_date "$HAPROXY_TAG" "$HAPROXY_HASH"; then
  ctx="$WORK/haproxy"
  mkdir -p "$ctx"
  printf '%s\n' "$HAPROXY_DOCKERFILE" >"$ctx/Dockerfile"
  build_image "$HAPROXY_TAG" "$HAPROXY_HASH" "$ctx"
fi
say "done in $(since "$start_ms")"
