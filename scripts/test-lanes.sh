#!/usr/bin/env bash
# Runs the jest suite in two lanes:
#   shared  every file not marked `// @lane alone`, in one jest run of TEST_LANES_WORKERS workers
#           (default: two per core, as the files wait on containers, browsers and
#           swarms a good part of their time), longest first (test/sequencer.mjs orders them by
#           test/durations.json), so that the cores stay busy to the end; files that use the Docker
#           Engine run beside each other, each on containers, volumes and networks labelled with its
#           own control-plane id;
#   alone   files whose first line is `// @lane alone` (they stop the engine), after it, by themselves.
# Each lane is one jest run (its own template database). Exits 1 when any lane failed.
# With arguments, jest runs them as given, in one run: `npm test -- test/unit`.
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
  jest "$@"
  exit
fi

shared=() alone=()
while IFS= read -r file; do
  case "$(head -n 1 "$file")" in
    '// @lane alone'*) alone+=("$file") ;;
    *) shared+=("$file") ;;
  esac
done < <(find test -name '*.test.ts' | sort)
workers="${TEST_LANES_WORKERS:-$((2 * $(nproc)))}"
say "${#shared[@]} files in $workers workers, ${#alone[@]} alone after"

started=$(now_ms)
lane shared --maxWorkers="$workers" "${shared[@]}"
shared_status=$?
say "shared lane done in $(since "$started")"
lane alone "${alone[@]}"
alone_status=$?

say "exit status: shared $shared_status, alone $alone_status; all lanes in $(since "$started")"
[ "$shared_status" = 0 ] && [ "$alone_status" = 0 ]
