#!/usr/bin/env bash
# Installs tools/openapi-typescript (openapi-typescript, which writes the panel's API types from
# docs/openapi.json) when its lock file changed since the last install; a no-op otherwise. It lives
# apart from the project's packages because it needs TypeScript 5's compiler API, which the
# project's TypeScript 7 does not have. Run by scripts/provision.sh (the tests compare the kept
# types with what it writes) and by `npm run openapi`.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=openapi-tools
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
clean_environment "$ROOT/scripts/$(basename "$0")"

DIR="$ROOT/tools/openapi-typescript"
STAMP="$DIR/node_modules/.installed"
WANT="$(sha256sum "$DIR/package-lock.json" | cut -c1-16)"
[ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ] && exit 0
[ -x "$ROOT/node_modules/.bin/node" ] || die "no Node in node_modules/.bin: run npm install first"
started=$(now_ms)
settings=(npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false)
for setting in registry cafile; do
  value="$(npm_config "$setting")"
  if [ -n "$value" ]; then settings+=("npm_config_$setting=$value"); fi
done
# On the project's Node (what runs the tool), with the machine npm's registry and CA file only.
(cd "$DIR" && env PATH="$ROOT/node_modules/node/bin:$PATH" "${settings[@]}" npm ci --ignore-scripts --loglevel=error >/dev/null) ||
  die "installing tools/openapi-typescript failed (npm ci in $DIR)"
printf '%s\n' "$WANT" >"$STAMP"
say "installed tools/openapi-typescript in $(since "$started")"
