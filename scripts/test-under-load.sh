#!/usr/bin/env bash
# Runs test files again and again with a CPU hog beside them, as a busy machine (a first run on a
# new machine, a CI host shared with other jobs) runs them: `stress-ng --cpu 2` (Debian's stress-ng,
# installed when missing) for the whole time, then ROUNDS runs of jest on the given files, one
# after another. Prints each round's result and the count of failed rounds; exits 1 if any failed.
# Needs what `npm test` provisions (run it once first).
#
#   bash scripts/test-under-load.sh 10 test/integration/proxy.test.ts test/e2e/editor.test.ts
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=test-under-load
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
ROUNDS="${1:?usage: test-under-load.sh ROUNDS FILE...}"
shift
[ "$#" -gt 0 ] || die "name the test files to run"

if ! command -v stress-ng >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || die "stress-ng is missing: install the Debian package stress-ng"
  say "installing stress-ng"
  apt_install stress-ng
fi
stress-ng --cpu 2 --timeout 0 >/dev/null 2>&1 &
hog=$!
trap 'kill "$hog" 2>/dev/null || true' EXIT

failed=0
cd "$ROOT"
for round in $(seq 1 "$ROUNDS"); do
  start=$(now_ms)
  if PATH="$ROOT/node_modules/.bin:$PATH" node --no-warnings=ExperimentalWarning --experimental-vm-modules node_modules/jest/bin/jest.js "$@" >"/tmp/test-under-load.$round.log" 2>&1; then
    say "round $round: passed in $(since "$start")"
  else
    failed=$((failed + 1))
    say "round $round: FAILED in $(since "$start") (log: /tmp/test-under-load.$round.log)"
  fi
done
say "$failed of $ROUNDS rounds failed, with stress-ng --cpu 2 running beside them"
[ "$failed" = 0 ]
