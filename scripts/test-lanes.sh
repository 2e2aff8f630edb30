#!/usr/bin/env bash
# Runs the checks and the jest suite in lanes:
#   shared  every integration and page file not marked `// @lane alone`, in one jest run of
#           TEST_LANES_WORKERS workers (default: two per core, as the files wait on containers,
#           browsers and swarms a good part of their time), longest first (test/sequencer.mjs orders
#           them by test/durations.json), so that the cores stay busy to the end; files that use the
#           Docker Engine run beside each other, each on containers, volumes and networks labelled
#           with its own control-plane id;
#   alone   files whose first line is `// @lane alone` (they stop the engine, or must not have a
#           heavy file beside them), after it, one at a time;
#   unit    the files of test/unit/ (no engine, no browser), beside the alone lane, in two workers
#           that each run file after file (a new process for each cost half a CPU-second a file);
#   checks  `npm run check` (types, lint, format), beside the alone lane too.
# The alone lane leaves part of both cores idle (its longest file, the Driver Station's, waits on
# its page: alone it kept the machine 78 % busy), and the shared lane none: what runs beside the
# alone lane uses time the run would otherwise leave idle. The unit lane's and the checks' output
# is printed once both have ended. With TEST_LANES_WORKERS=1 they run after the alone lane instead.
# Each jest lane is one jest run (its own template database). Exits 1 when any lane failed.
# With arguments, the checks run first, then jest runs the arguments as given, in one run:
# `npm test -- test/unit`.
# TEST_DURATIONS=1 writes each file's time into test/durations.json (test/durations-reporter.mjs).
# TEST_LANES_WORKERS=1 runs the files one at a time, and TEST_LANES_REPORTER=<file> adds a jest
# reporter to every lane (SUITE_CPU_LANE names the lane for it): bench/suite-cpu.ts uses both to
# count each file's CPU with nothing beside it.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCRIPT=test-lanes
# shellcheck source=lib.sh
. "$ROOT/scripts/lib.sh"
cd "$ROOT"
jest() { node --no-warnings=ExperimentalWarning --experimental-vm-modules node_modules/jest/bin/jest.js "$@"; }
# A lane's jest run: `lane <name> <files>...`.
lane() {
  local name=$1 reporters=()
  shift
  [ -z "${TEST_LANES_REPORTER:-}" ] || reporters+=(--reporters="$TEST_LANES_REPORTER")
  [ "${TEST_DURATIONS:-}" != 1 ] || reporters+=(--reporters="$ROOT/test/durations-reporter.mjs")
  [ "${#reporters[@]}" = 0 ] || reporters=(--reporters=default "${reporters[@]}")
  SUITE_CPU_LANE="$name" jest "${reporters[@]}" --runTestsByPath "$@"
}
if [ "$#" -gt 0 ]; then
  npm run -s check || exit
  jest "$@"
  exit
fi

shared=() alone=() unit=()
while IFS= read -r file; do
  case "$file:$(head -n 1 "$file")" in
    *':// @lane alone'*) alone+=("$file") ;;
    test/unit/*) unit+=("$file") ;;
    *) shared+=("$file") ;;
  esac
done < <(find test -name '*.test.ts' | sort)
workers="${TEST_LANES_WORKERS:-$((2 * $(nproc)))}"
say "${#shared[@]} files in $workers workers, then ${#alone[@]} alone, with ${#unit[@]} unit files and the checks beside them"

started=$(now_ms)
lane shared --maxWorkers="$workers" "${shared[@]}"
shared_status=$?
say "shared lane done in $(since "$started")"

beside=$(mktemp -d)
trap 'rm -rf "$beside"' EXIT
# The unit lane's workers each run file after file: a limit no worker reaches.
unit_lane() { lane unit --maxWorkers="$((workers < 2 ? workers : 2))" --workerIdleMemoryLimit=64GB "${unit[@]}" >"$beside/unit" 2>&1; echo $? >"$beside/unit.status"; }
checks() { npm run -s check >"$beside/checks" 2>&1; echo $? >"$beside/checks.status"; }
if [ "$workers" = 1 ]; then
  # One file at a time (bench/suite-cpu.ts): nothing beside anything.
  lane alone "${alone[@]}"
  alone_status=$?
  unit_lane
  checks
else
  unit_lane &
  unit_pid=$!
  checks &
  checks_pid=$!
  lane alone "${alone[@]}"
  alone_status=$?
  wait "$unit_pid" "$checks_pid"
fi
say "the unit lane:"
cat "$beside/unit"
say "the checks:"
cat "$beside/checks"
unit_status=$(cat "$beside/unit.status")
checks_status=$(cat "$beside/checks.status")

say "exit status: shared $shared_status, alone $alone_status, unit $unit_status, checks $checks_status; all lanes in $(since "$started")"
[ "$shared_status" = 0 ] && [ "$alone_status" = 0 ] && [ "$unit_status" = 0 ] && [ "$checks_status" = 0 ]
