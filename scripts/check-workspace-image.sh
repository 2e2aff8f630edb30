#!/usr/bin/env bash
# Checks a workspace image against the image contract (docs/workspace-image-contract.md), end to end
# on this machine's Docker Engine: an editor on a new home, a run beside it, its NetworkTables 4, its
# robot enabled and driven over HALSim, then disabled; one line per step, exit 0 only when all pass.
#
#   bash scripts/check-workspace-image.sh [options] [IMAGE]      (--help for the options)
#
# Runs scripts/check-workspace-image.ts with the project's pinned Node (node_modules/.bin/node), so
# the checkout needs `npm ci` first.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE="$ROOT/node_modules/.bin/node"
if [ ! -x "$NODE" ]; then
  echo "check-workspace-image: $NODE is missing: run npm ci in $ROOT first" >&2
  exit 2
fi
exec "$NODE" --no-warnings=ExperimentalWarning "$ROOT/scripts/check-workspace-image.ts" "$@"
