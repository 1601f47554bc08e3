#!/usr/bin/env bash
# Runs CI (.ci/run) N times, each from a fresh clone of this checkout's HEAD, one after another,
# and stops at the first red run. Usage: scripts/ci-repeat.sh [N] [LOGDIR]. Each run's output goes
# to LOGDIR/run-K.log; the last line says how many passed in a row.
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-5}
logs=${2:-$(mktemp -d /tmp/sm4j-ci-repeat.XXXXXX)}
mkdir -p "$logs"
head=$(git rev-parse HEAD)
green=0
for k in $(seq 1 "$n"); do
  dir=$(mktemp -d /tmp/sm4j-ci-clone.XXXXXX)
  git clone -q . "$dir" && git -C "$dir" checkout -q "$head"
  start=$(date +%s)
  (cd "$dir" && CI=true bash .ci/run) >"$logs/run-$k.log" 2>&1 </dev/null
  rc=$?
  rm -rf "$dir"
  echo "run $k of $n at $head: exit $rc in $(( $(date +%s) - start )) s ($logs/run-$k.log)"
  if [ "$rc" != 0 ]; then
    grep -E 'Tests run:.*(Failures: [1-9]|Errors: [1-9])|FAIL|left [0-9]+ socket' "$logs/run-$k.log" | head -20
    echo "$green of $n consecutive runs green before run $k failed"
    exit 1
  fi
  green=$((green + 1))
done
echo "$green of $n consecutive runs green"
