#!/usr/bin/env bash
# Brings up what the test suite needs on this machine, installing from Debian's packages when
# missing: a PostgreSQL server on 127.0.0.1:${TEST_PG_PORT:-54329} (trust auth, loopback only,
# durability off: it only holds throwaway test databases) and a Docker Engine. Idempotent and
# quick when both already answer. Needs root to install; otherwise says what to install.
set -euo pipefail

PG_PORT="${TEST_PG_PORT:-54329}"
PG_DIR="${TEST_PG_DIR:-/var/tmp/workspace-control-plane-test-pg}"
DOCKERD_LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
apt_updated=0

say() { printf 'provision: %s\n' "$*"; }
need_root() {
  if [ "$(id -u)" != 0 ]; then
    say "$1 is missing and installing it needs root: run as root, or install it ($2) and start it yourself"
    exit 1
  fi
}
apt_install() {
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }

provision_postgres() {
  local bin
  bin=$(pg_bin)
  if [ -n "$bin" ] && "$bin/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; then return; fi
  if [ -z "$bin" ] || [ ! -x "$bin/postgres" ]; then
    need_root PostgreSQL "Debian package postgresql"
    say "installing PostgreSQL"
    apt_install postgresql
    bin=$(pg_bin)
  fi
  if [ ! -s "$PG_DIR/PG_VERSION" ]; then
    [ "$(id -u)" = 0 ] || { say "cannot create the test cluster as non-root here; set TEST_DATABASE_URL to a server you run"; exit 1; }
    say "creating the test cluster in $PG_DIR"
    mkdir -p "$PG_DIR"
    chown postgres:postgres "$PG_DIR"
    runuser -u postgres -- "$bin/initdb" -D "$PG_DIR" -U postgres -A trust -E UTF8 --no-sync >/dev/null
  fi
  say "starting PostgreSQL on 127.0.0.1:$PG_PORT"
  runuser -u postgres -- "$bin/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p $PG_PORT -k /tmp -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" >/dev/null
}

provision_docker() {
  if docker info >/dev/null 2>&1; then return; fi
  if ! command -v dockerd >/dev/null 2>&1; then
    need_root "Docker Engine" "Debian package docker.io"
    say "installing Docker Engine"
    apt_install docker.io
  fi
  if ! pgrep -x dockerd >/dev/null; then
    need_root "a running Docker Engine" "start dockerd"
    say "starting dockerd (log: $DOCKERD_LOG)"
    nohup dockerd >"$DOCKERD_LOG" 2>&1 &
  fi
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && return
    sleep 0.5
  done
  say "dockerd did not answer within 30 s; see $DOCKERD_LOG"
  exit 1
}

provision_chromium() {
  if [ -x /usr/bin/chromium ]; then return; fi
  need_root Chromium "Debian package chromium"
  say "installing Chromium (for the browser tests)"
  apt_install chromium
}

provision_postgres
provision_docker
provision_chromium
bash "$(dirname "$0")/build-test-image.sh"
bash "$(dirname "$0")/build-workspace-image.sh"

# ---- Docker Compose (test/integration/compose.test.ts: compose.yaml brought up and torn down) ----
# The `docker compose` plugin where Docker's own packages are installed, else Debian's docker-compose
# (1.29, Python): both read compose.yaml.
provision_compose() {
  if docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1; then return; fi
  need_root "Docker Compose" "Debian package docker-compose"
  say "installing Docker Compose (Debian's docker-compose)"
  apt_install --no-install-recommends docker-compose
}
provision_compose
