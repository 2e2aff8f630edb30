#!/usr/bin/env bash
# Checks the README's line that gets npm on a bare Debian 12 (issue 41, item 12): runs that line,
# as the README writes it, in a bare Debian 12 root (the debootstrap minbase root that
# build-base-images.sh keeps as classroom-base/stage:debian-<hash>: no Node, no npm), then
# `npm ci` of the committed HEAD there with the npm it installed, and checks that the project's own
# Node 24 is what runs it (node_modules/.bin/node --version, bin/cli --help). About 3 minutes
# (apt, then every npm package downloaded afresh). Run by test-from-cold.sh after its suite;
# alone: `bash scripts/check-quickstart-npm.sh` (needs Docker and the base images: bash
# scripts/build-base-images.sh, as root).
#
# This machine's own trust store goes into the container as NODE_EXTRA_CA_CERTS: where the network
# re-signs TLS (as on these build machines), Debian's npm would otherwise refuse the registry. On an
# ordinary network it changes nothing.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=check-quickstart-npm
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"

line="$(grep -m 1 -E '^apt-get update && apt-get install .*\bnpm\b' "$ROOT/README.md" || true)"
[ -n "$line" ] || die "README.md has no line starting 'apt-get update && apt-get install … npm'"
stage="$(docker images --format '{{.Repository}}:{{.Tag}}' classroom-base/stage | grep -m 1 ':debian-' || true)"
[ -n "$stage" ] || die "no bare Debian root (classroom-base/stage:debian-*): run bash scripts/build-base-images.sh first"
CA=/etc/ssl/certs/ca-certificates.crt
[ -s "$CA" ] || die "no CA bundle at $CA"

SOURCE="$(mktemp -d /tmp/check-quickstart-npm.XXXXXX)"
trap 'rm -rf "$SOURCE"' EXIT
git clone -q --no-local "$ROOT" "$SOURCE/project"
say "in $stage: $line"
start=$(date +%s)
set +e
docker run --rm -v "$SOURCE/project:/src:ro" -v "$CA:/etc/ssl/certs/machine-ca.crt:ro" -e NODE_EXTRA_CA_CERTS=/etc/ssl/certs/machine-ca.crt \
  -e DEBIAN_FRONTEND=noninteractive -e README_LINE="$line" "$stage" sh -ec '
    command -v npm >/dev/null && { echo "npm is already there: not a bare Debian"; exit 1; }
    sh -ec "$README_LINE" >/tmp/apt.log 2>&1 || { tail -n 20 /tmp/apt.log; exit 1; }
    echo "npm $(npm --version) on Node $(node --version) (Debian'"'"'s)"
    cp -r /src /tmp/project && cd /tmp/project
    npm ci --no-audit --no-fund --loglevel=error >/tmp/npm.log 2>&1 || { tail -n 30 /tmp/npm.log; exit 1; }
    version=$(node_modules/.bin/node --version)
    case "$version" in v24.*) ;; *) echo "the project'"'"'s Node is $version, not 24"; exit 1 ;; esac
    bin/cli --help >/dev/null
    echo "npm ci done; the project runs on its own Node $version"
  ' | while IFS= read -r out; do say "$out"; done
status=${PIPESTATUS[0]}
set -e
[ "$status" = 0 ] || die "the README's npm line did not bring a working project (exit $status)"
say "ok in $(($(date +%s) - start)) s"
