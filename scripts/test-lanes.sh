#!/usr/bin/env bash
# Runs the jest suite in three lanes, so that a 2-core machine is kept busy while files that share
# one Docker Engine still never run two at a time:
#   engine  every file not marked otherwise: they use the Docker Engine, one at a time;
#   local   files whose first line is `// @lane local` (nothing of theirs touches the engine),
#           one at a time, beside the engine lane; their output is printed when both are done;
#   alone   files whose first line is `// @lane alone` (they stop the engine, or keep both cores busy),
#           after both, by themselves.
# Each lane is one jest run (its own template database). Exits 1 when any lane failed.
# With arguments, jest runs them as given, in one run: `npm test -- test/unit`.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=test-lanes
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
cd "$ROOT"
jest() { node --no-warnings=ExperimentalWarning --experimental-vm-modules node_modules/jest/bin/jest.js "$@"; }
if [ "$#" -gt 0 ]; then
  jest "$@"
  exit
fi

engine=() local_files=() alone=()
while IFS= read -r file; do
  case "$(head -n 1 "$file")" in
    '// @lane local'*) local_files+=("$file") ;;
    '// @lane alone'*) alone+=("$file") ;;
    *) engine+=("$file") ;;
  esac
done < <(find test -name '*.test.ts' | sort)
say "${#engine[@]} files in the engine lane, ${#local_files[@]} beside it, ${#alone[@]} alone after"

started=$(now_ms)
local_log="$(mktemp "${TMPDIR:-/tmp}/test-lanes-local.XXXXXX")"
trap 'rm -f "$local_log"' EXIT
jest --runTestsByPath "${local_files[@]}" >"$local_log" 2>&1 &
local_pid=$!
jest --runTestsByPath "${engine[@]}"
engine_status=$?
wait "$local_pid"
local_status=$?
say "the local lane (it ran beside the engine lane):"
cat "$local_log"
say "engine and local lanes done in $(since "$started")"
jest --runTestsByPath "${alone[@]}"
alone_status=$?

say "exit status: engine $engine_status, local $local_status, alone $alone_status; all lanes in $(since "$started")"
[ "$engine_status" = 0 ] && [ "$local_status" = 0 ] && [ "$alone_status" = 0 ]
