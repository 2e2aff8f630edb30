#!/usr/bin/env bash
# Start-up time of the control plane to its first healthy /healthz, on the embedded database (fresh
# and existing data directory) and on the test PostgreSQL server. Prints milliseconds, median of N runs.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-5}"
PORT="${BENCH_PORT:-18080}"
PG_URL="${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:54329/postgres}"

measure() { # env assignments...; prints ms to first 200 from /healthz
  local start end pid
  start=$(date +%s%N)
  env "$@" PORT="$PORT" LOG_LEVEL=warning bin/server >/dev/null 2>&1 &
  pid=$!
  until curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1; do sleep 0.01; done
  end=$(date +%s%N)
  kill -TERM "$pid"; wait "$pid" || true
  echo $(((end - start) / 1000000))
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

dir=$(mktemp -d)
fresh=$(for _ in $(seq "$N"); do rm -rf "$dir"/*; measure DATA_DIR="$dir"; done | median)
existing=$(for _ in $(seq "$N"); do measure DATA_DIR="$dir"; done | median)
rm -rf "$dir"
PGOPTIONS='-c client_min_messages=warning' psql "$PG_URL" -qc 'DROP DATABASE IF EXISTS cp_bench_startup' -qc 'CREATE DATABASE cp_bench_startup' >/dev/null
url="${PG_URL%/*}/cp_bench_startup"
postgres=$(for _ in $(seq "$N"); do measure DATABASE_URL="$url"; done | median)
psql "$PG_URL" -qc 'DROP DATABASE cp_bench_startup' >/dev/null
echo "startup to first healthy /healthz (median of $N, ms): embedded fresh=$fresh embedded existing=$existing postgresql=$postgres"
