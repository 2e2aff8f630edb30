#!/usr/bin/env bash
# Runs the whole suite as a new machine meets it: removes the project's images (starting the Docker
# Engine first when it is stopped, as its images are still there) and build caches
# (the test image, the workspace image and its stages, the base and control images, the swarm
# node and registry images, their cache directories under /var/cache, the test browser's library,
# the test PostgreSQL cluster), clones the committed HEAD into a fresh directory (no node_modules) and runs `bash .ci/run` there, each line stamped with the
# seconds since the start. What stays: the machine's Debian packages (PostgreSQL, Docker Engine,
# Chromium, build tools: a new machine spends about 3 minutes installing them) and npm's download
# cache (~/.npm). Uncommitted changes are not part of the run. Needs root, as provisioning does.
# After a green suite, scripts/check-quickstart-npm.sh checks the README's npm line on a bare Debian 12.
#
#   bash scripts/test-from-cold.sh            # log: /tmp/test-from-cold.log
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=test-from-cold
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
LOG_FILE="${TEST_FROM_COLD_LOG:-/tmp/test-from-cold.log}"
PG_DIR="${TEST_PG_DIR:-/var/tmp/workspace-control-plane-test-pg}"

[ "$(id -u)" = 0 ] || die "run as root: the caches are under /var/cache and provisioning installs packages"
[ -z "$(git -C "$ROOT" status --porcelain)" ] || say "uncommitted changes are left out: the run is of HEAD ($(git -C "$ROOT" rev-parse --short HEAD))"

# A stopped engine still holds its images: start it, so that they are removed too.
provision_docker
say "removing the project's images and build caches"
for label in service.test-image-hash service.workspace-image-hash service.control-image-hash service.base-image-hash service.swarm-node-image-hash service.registry-image-hash; do
  docker images -q --filter "label=$label" | sort -u | xargs -r docker rmi -f >/dev/null 2>&1 || true
done
docker images --format '{{.Repository}}:{{.Tag}}' |
  grep -E '^(classroom-workspace-stage|classroom-base/stage|classroom-base/node|classroom-base/postgres|classroom-base/haproxy|classroom-control):' |
  xargs -r docker rmi -f >/dev/null 2>&1 || true
docker image prune -f >/dev/null
rm -rf /var/cache/classroom-workspace /var/cache/classroom-base "${TEST_BROWSER_CACHE:-/var/cache/classroom-test}"
if [ -s "$PG_DIR/PG_VERSION" ]; then
  bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  runuser -u postgres -- "$bin/pg_ctl" -D "$PG_DIR" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
fi

CLONE="$(mktemp -d /tmp/test-from-cold.XXXXXX)"
trap 'rm -rf "$CLONE"' EXIT
git clone -q --no-local "$ROOT" "$CLONE"
say "running bash .ci/run in $CLONE (log: $LOG_FILE)"
start=$(date +%s)
set +e
(cd "$CLONE" && bash .ci/run) 2>&1 | while IFS= read -r line; do printf '[%4ds] %s\n' $(($(date +%s) - start)) "$line"; done | tee "$LOG_FILE"
status=${PIPESTATUS[0]}
set -e
say "bash .ci/run exited $status after $(($(date +%s) - start)) s (phases: the provision line and jest's Time line above)"
[ "$status" = 0 ] || exit "$status"
# The README's line for npm on a bare Debian 12 (the suite built the bare root it runs in).
bash "$CLONE/scripts/check-quickstart-npm.sh" 2>&1 | tee -a "$LOG_FILE"
exit "${PIPESTATUS[0]}"
