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
# TEST_LANES_ONE_AT_A_TIME=1 runs the local lane after the engine lane instead of beside it, and
# TEST_LANES_REPORTER=<file> adds a jest reporter to every lane (SUITE_CPU_LANE names the lane for
# it): bench/suite-cpu.ts uses both to count each file's CPU with nothing beside it.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=test-lanes
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
cd "$ROOT"
jest() { node --no-warnings=ExperimentalWarning --experimental-vm-modules node_modules/jest/bin/jest.js "$@"; }
# A lane's jest run: `lane <name> <files>...`.
lane() {
  local name=$1
  shift
  if [ -n "${TEST_LANES_REPORTER:-}" ]; then
    SUITE_CPU_LANE="$name" jest --reporters=default --reporters="$TEST_LANES_REPORTER" --runTestsByPath "$@"
  else
    jest --runTestsByPath "$@"
  fi
}
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
if [ "${TEST_LANES_ONE_AT_A_TIME:-}" = 1 ]; then
  lane engine "${engine[@]}"
  engine_status=$?
  lane local "${local_files[@]}"
  local_status=$?
  say "engine and local lanes done, one after the other, in $(since "$started")"
else
  lane local "${local_files[@]}" >"$local_log" 2>&1 &
  local_pid=$!
  lane engine "${engine[@]}"
  engine_status=$?
  wait "$local_pid"
  local_status=$?
  say "the local lane (it ran beside the engine lane):"
  cat "$local_log"
  say "engine and local lanes done in $(since "$started")"
fi
lane alone "${alone[@]}"
alone_status=$?

say "exit status: engine $engine_status, local $local_status, alone $alone_status; all lanes in $(since "$started")"
[ "$engine_status" = 0 ] && [ "$local_status" = 0 ] && [ "$alone_status" = 0 ]
