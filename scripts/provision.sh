#!/usr/bin/env bash
# Brings up what the test suite needs on this machine, installing from Debian's packages when
# missing: a PostgreSQL server on 127.0.0.1:${TEST_PG_PORT:-54329} (trust auth, loopback only,
# durability off: it only holds throwaway test databases), a Docker Engine, Chromium (and the shim
# that keeps it off the host's network changes), Docker
# Compose, Prometheus and PgBouncer, and openapi-typescript (tools/openapi-typescript); then builds every image the tests use (the test image, the
# workspace image, the production images of the compose tests), so that no image is built while
# tests run. Idempotent
# and quick when all is there (each build script is a no-op when its image is up to date). Needs
# root to install; otherwise says what to install. Prints how long each phase took when any did.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=provision
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"

PG_PORT="${TEST_PG_PORT:-54329}"
PG_DIR="${TEST_PG_DIR:-/var/tmp/workspace-control-plane-test-pg}"

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
    (cd / && runuser -u postgres -- "$bin/initdb" -D "$PG_DIR" -U postgres -A trust -E UTF8 --no-sync >/dev/null)
  fi
  say "starting PostgreSQL on 127.0.0.1:$PG_PORT"
  # From /: postgres may not enter the caller's directory (a checkout under /root, say).
  (cd / && runuser -u postgres -- "$bin/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p $PG_PORT -k /tmp -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" >/dev/null)
}

# Chromium's old headless shell for the page tests (half the CPU of the full browser's headless
# mode: test/helpers/browser.ts), and the full browser for the benchmarks that time what a student sees.
provision_chromium() {
  if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromium-headless-shell ]; then return; fi
  need_root Chromium "Debian packages chromium and chromium-headless-shell"
  say "installing Chromium and its headless shell (for the browser tests and benchmarks)"
  apt_install chromium chromium-headless-shell
}

# The library that keeps the tests' Chromium from watching the host's network
# (test/helpers/no-netlink.c says why), built into TEST_BROWSER_CACHE under the source's hash:
# test/helpers/browser.ts finds it by the same name.
provision_browser_shim() {
  local src="$ROOT/test/helpers/no-netlink.c" dir="${TEST_BROWSER_CACHE:-/var/cache/classroom-test}" out
  out="$dir/no-netlink-$(hash16 <"$src").so"
  if [ -f "$out" ]; then return; fi
  if ! command -v cc >/dev/null 2>&1; then
    need_root "a C compiler" "Debian packages gcc and libc6-dev"
    say "installing a C compiler (for the browser tests' shim)"
    apt_install --no-install-recommends gcc libc6-dev
  fi
  mkdir -p "$dir"
  cc -shared -fPIC -O2 -Wall -Werror -o "$out.tmp.$$" "$src" -ldl && mv "$out.tmp.$$" "$out"
}

# Docker Compose (test/integration/compose.test.ts: compose.yaml brought up and torn down): the
# `docker compose` plugin where Docker's own packages are installed, else Debian's docker-compose
# (1.29, Python): both read compose.yaml.
provision_compose() {
  if docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1; then return; fi
  need_root "Docker Compose" "Debian package docker-compose"
  say "installing Docker Compose (Debian's docker-compose)"
  apt_install --no-install-recommends docker-compose
}

# apt_install_no_services PACKAGE…: installs Debian packages whose maintainer scripts would start
# their own service where an init system runs; policy-rc.d keeps them from starting any here.
apt_install_no_services() {
  local policy=/usr/sbin/policy-rc.d created=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1
  fi
  apt_install --no-install-recommends "$@"
  [ "$created" = 0 ] || rm -f "$policy"
}

# Prometheus and promtool (test/integration/monitoring.test.ts: the shipped alerting rules' unit
# tests, and a real Prometheus scraping a control plane).
provision_prometheus() {
  if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then return; fi
  need_root Prometheus "Debian package prometheus"
  say "installing Prometheus (for the monitoring test)"
  apt_install_no_services prometheus
}

# PgBouncer (test/integration/pooler.test.ts: replicas behind a pooler in transaction mode).
provision_pgbouncer() {
  if [ -x /usr/sbin/pgbouncer ]; then return; fi
  need_root PgBouncer "Debian package pgbouncer"
  say "installing PgBouncer (for the pooler test)"
  apt_install_no_services pgbouncer
}

# The images: the stand-in test image, the real workspace image (code-server), and the production
# image on local base images for the compose test (classroom-control:test).
build_test_image() { bash "$ROOT/scripts/build-test-image.sh"; }
build_workspace_image() { bash "$ROOT/scripts/build-workspace-image.sh"; }
# The Docker-in-Docker node of the swarm tests (test/helpers/swarm.ts) and the cluster's registry
# they pull the workspace image from, both on the local Debian root that build_compose_images makes.
build_swarm_node_image() {
  bash "$ROOT/scripts/build-swarm-node-image.sh"
  bash "$ROOT/scripts/build-registry-image.sh"
}
build_openapi_tools() { bash "$ROOT/scripts/openapi-tools.sh"; }
build_compose_images() { LOCAL_BASE=1 CONTROL_IMAGE=classroom-control:test NODE_IMAGE= NPM_REGISTRY= bash "$ROOT/scripts/build-control-image.sh"; }

# phase NAME FUNCTION: runs it, noting how long it took.
TIMES=()
phase() {
  local t
  t=$(now_ms)
  "$2"
  TIMES+=("$1 $(since "$t")")
}
start_ms=$(now_ms)
phase postgres provision_postgres
phase docker provision_docker
phase chromium provision_chromium
phase browser-shim provision_browser_shim
phase compose provision_compose
phase prometheus provision_prometheus
phase pgbouncer provision_pgbouncer
phase openapi-tools build_openapi_tools
phase test-image build_test_image
phase workspace-image build_workspace_image
phase compose-images build_compose_images
phase swarm-node-image build_swarm_node_image
# A line only when provisioning did something (more than a few seconds of checks).
if [ $(($(now_ms) - start_ms)) -gt 5000 ]; then
  say "done in $(since "$start_ms"): $(IFS=,; printf '%s' "${TIMES[*]}" | sed 's/,/, /g')"
fi
